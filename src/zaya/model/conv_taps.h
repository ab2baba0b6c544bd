#pragma once
// What the CCA convolutions' kernel sizes (cca_time0 = k0, cca_time1 = k1;
// ZAYA1: 2 and 2) imply beyond the two weight shapes (docs/model.md
// "Convolution kernel sizes").

#include <cstdint>

#include "zaya/model/config.h"

namespace zaya {

// Past rows one convolution output reads, (k0 - 1) + (k1 - 1): the decoder's
// conv state per slot and block (raw q|k rows of the last tokens).
inline int64_t conv_history(const ZayaConfig& c) { return c.conv_kernel0 + c.conv_kernel1 - 2; }

// Rows before a context-parallel chunk that the convolutions and the value
// shift (one row) read: max(1, conv_history).
inline int64_t conv_halo_rows(const ZayaConfig& c) { return conv_history(c) > 1 ? conv_history(c) : 1; }

}  // namespace zaya
