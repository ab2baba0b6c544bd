#pragma once
// How many tensors a model has in each layout zaya.cpp reads and writes
// (tensor_table.h): legacy (one per half-layer tensor and expert), native
// (experts stacked per layer) and GGUF (experts stacked, fc1 split into gate
// and up). Counted from the tensor table and the GGUF map, never spelled out,
// so `zaya info` and the tests agree with what the writers produce.

#include <cstdint>

#include "zaya/model/config.h"

namespace zaya {

struct LayoutTensorCounts {
  int64_t legacy = 0;  // ZAYA1-base / ZAYA1-8B-legacy: 2,483
  int64_t native = 0;  // ZAYA1-8B: 1,283
  int64_t gguf = 0;
};

LayoutTensorCounts layout_tensor_counts(const ZayaConfig& config);

}  // namespace zaya
