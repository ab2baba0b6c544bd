#pragma once
// The bandwidth-bound work around the GEMMs (norms, convolutions, RoPE,
// softmax, SwiGLU, routing, expert permutes, residual merges, cross-entropy,
// optimizer updates), counted as floats moved, exponentials and op launches,
// and turned into time with the profile's stream bandwidth, exp rate and
// per-op overhead:
//
//   time = 4 bytes x floats / stream_gbps + exps / exp_per_second + ops x
//   op_overhead
//
// The counts follow the kernels in model/ and ops/ (one read or write of an
// activation element = one float); backward passes move about twice what the
// forward does. They are estimates of an implementation, stated per token in
// stream_ops.cc, not fitted to any measurement.

#include <cstdint>

#include "zaya/model/config.h"
#include "zaya/model/recompute.h"
#include "zaya/plan/hardware_profile.h"

namespace zaya {

struct StreamWork {
  double floats = 0;  // elements read or written
  double exps = 0;    // exp / sigmoid / tanh evaluations
  double ops = 0;     // separate kernels (parallel regions)
  StreamWork& operator+=(const StreamWork& o) {
    floats += o.floats;
    exps += o.exps;
    ops += o.ops;
    return *this;
  }
  double seconds(const HardwareProfile& p, double bytes_per_float = 4) const;
};

// Forward (and, with backward = true, forward + backward) of one micro-batch
// of B x S tokens on one rank holding experts / ep experts.
StreamWork model_stream_work(const ZayaConfig& c, int64_t batch, int64_t seq, int64_t ep, double skip_fraction,
                             bool backward);

// The forward work the backward pass repeats under `recompute`
// (model/recompute.h): the attention and/or MoE blocks, and with full also
// every half-layer's RMSNorm; nothing for none.
StreamWork recompute_stream_work(const ZayaConfig& c, int64_t batch, int64_t seq, int64_t ep, double skip_fraction,
                                 Recompute recompute);

// Element-wise optimizer work on `floats` parameters: AdamW (m, v, weight) or
// Muon's momentum, normalisation and Newton-Schulz element-wise steps.
StreamWork adamw_stream_work(double floats);
StreamWork muon_stream_work(double floats, int ns_steps);

}  // namespace zaya
