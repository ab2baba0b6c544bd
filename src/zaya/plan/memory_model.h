#pragma once
// Memory per device during training (docs/plan.md):
//   weights      params held (dense + experts / ep) x weight bytes; with bf16
//                GEMMs a bf16 copy plus the f32 master (mixed precision):
//                zaya.cpp's CPU trainer (layout.cpu_trainer) holds the whole
//                f32 master and the copy, a GPU stack the copy and its shard
//                of the master (under optimizer)
//   gradients    params held x 4 (f32 accumulation)
//   optimizer    ZeRO-1: this rank's shard of Muon momentum (1 float) and
//                AdamW moments (2 floats) (+ Newton-Schulz scratch)
//   activations  the batch-sized workspace of one micro-batch
//                (model/model.h): what the forward keeps for backward (the
//                residual stream and, per half-layer not recomputed, the
//                buffers of model/attention_block.h and moe_block.h; one set
//                for the recomputed ones: layout.recompute), and the backward
//                scratch; float32 on the CPU trainer (with bf16 GEMMs the
//                inputs only GEMMs read kept as bf16 where their block kind
//                is not recomputed), the GEMM dtype on GPUs
//   logits       f32 logits (on GPUs also their gradient)

#include <cstdint>

#include "zaya/model/config.h"
#include "zaya/model/recompute.h"
#include "zaya/plan/step_model.h"

namespace zaya {

struct MemoryPrediction {
  double params_held = 0;  // parameters on one device
  double weights = 0, gradients = 0, optimizer = 0, activations = 0,
         logits = 0;  // bytes
  double total() const { return weights + gradients + optimizer + activations + logits; }
};

MemoryPrediction predict_memory(const ZayaConfig& c, const TrainLayout& layout);

// Activation floats per token of one micro-batch's workspace (model/model.h)
// under `recompute`, without the logits (and without convA's one extra row
// per sequence and the per-thread attention scratch).
// Routed rows count top_k (1 - skip_fraction) per token: the rows an expert
// buffer holds (zaya.cpp reserves top_k x ep rows per token for dropless
// expert parallelism and touches those the tokens use). bf16_inputs: the
// inputs only GEMMs read kept as bf16 where each layer keeps its own (half a
// float a value, without the row padding), with one float32 set for the
// forward (model/model.h: the experts' routed rows and SwiGLU output, the
// attention blocks' normed inputs).
double activation_floats_per_token(const ZayaConfig& c, double skip_fraction, Recompute recompute,
                                   bool bf16_inputs = false);

}  // namespace zaya
