#pragma once
// Training step time on a hardware profile (docs/plan.md): for a config and a
// layout (world = dp x ep x cp ranks, micro-batch, sequence length, accumulation)
//
//   compute   = accum x (every forward/backward GEMM of a micro-batch, from
//               GemmModel + the bandwidth-bound ops, stream_ops.h)
//   optimizer = the busiest rank's ZeRO-1 shard: Muon's Newton-Schulz GEMMs
//               + element-wise updates (dist/zero.h assigns whole tensors)
//   comm      = ZeRO-1 gradient reduce-scatter (dense region over the world,
//               expert region over the dp x cp ranks holding the same
//               experts) + parameter all-gather, with ep > 1 four all-to-alls
//               per MoE layer and micro-batch (dispatch and combine, forward
//               and backward), and with cp > 1 per attention layer and
//               micro-batch the K/V all-gathers (2 forward, 2 backward) and
//               the reduce-scatters of their gradients (2)
//
// Context parallelism gives each rank 1/cp of every GEMM of a micro-batch
// (rows of the token-wise ones, balanced attention pairs under zig-zag:
// model/context_parallel.h); the GEMMs are timed at the whole sequence's
// shapes and divided by cp, so the lower efficiency of the smaller shapes is
// not modelled (a note says so).
//   step      = compute + optimizer + exposed comm, where the reduce-scatter
//               hides behind the last micro-batch's backward when `overlap`
//
// Recomputation (layout.recompute) adds the recomputed blocks' forward GEMMs
// and bandwidth-bound ops to every micro-batch's backward; those FLOPs are
// not model FLOPs, so the MFU drops by their time.
//
// MFU = model FLOPs (3 x model_forward_flops, the FLOPs `zaya bench train`
// counts, with each sliding block's attention over its window only:
// plan/attention_window.h) / step time / the profile's peak of the GEMM dtype.
// Sliding blocks' attention GEMMs are timed at the window's key count.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/bench/gemm_shapes.h"
#include "zaya/model/config.h"
#include "zaya/model/recompute.h"
#include "zaya/plan/gemm_model.h"
#include "zaya/plan/hardware_profile.h"

namespace zaya {

struct TrainLayout {
  int64_t world = 1;  // devices (ranks)
  int64_t ep = 1;
  int64_t cp = 1;  // context-parallel ranks: each sequence split over them
  int64_t micro_batch = 8, seq_len = 256, grad_accum = 1;
  std::string dtype = "f32";      // forward/backward GEMMs
  std::string ns_dtype = "bf16";  // Muon's Newton-Schulz GEMMs
  bool muon = true;
  int ns_steps = 5;
  double skip_fraction = 0;
  int overlap = -1;        // hide the reduce-scatter behind backward: 1 yes, 0 no, -1
                           // auto (GPUs yes, CPUs no)
  double grad_bytes = 4;   // bytes per gradient element reduced
  double param_bytes = 4;  // bytes per parameter element gathered
  // train.recompute (model/recompute.h): the recomputed blocks' forward runs
  // again in backward, and only one set of their activations is held.
  Recompute recompute = Recompute::kNone;
  // train.loss_chunk (model/model.h): rows of logits held at once (0: all of a micro-batch's).
  int64_t loss_chunk = 0;
  // Whose memory layout (memory_model.h): zaya.cpp's CPU trainer (CPU
  // profiles: float32 activations in both precisions, the logits' gradient
  // in place of the logits, every rank's full f32 parameters plus their bf16
  // copy under bf16 GEMMs), or a GPU stack's (activations in the GEMM dtype,
  // logits and their gradient, bf16 weights with the f32 master in the
  // ZeRO-1 shard).
  bool cpu_trainer = false;
  // Data-parallel replicas; the ranks holding the same experts (dp x cp).
  int64_t dp() const { return world / (ep * cp); }
  int64_t expert_replicas() const { return world / ep; }
  // Ranks reading distinct sequences (every rank of a cp group shares them).
  int64_t data_ranks() const { return world / cp; }
  int64_t tokens_per_step() const { return data_ranks() * micro_batch * seq_len * grad_accum; }
  // Throws naming the flag on an impossible layout (ep not dividing experts or
  // world, ...).
  void validate(const ZayaConfig& c, const HardwareProfile& p) const;
};

struct GemmTime {
  ModelGemm gemm;
  double seconds = 0;  // count x one call, per micro-batch
  GemmEstimate estimate;
};

struct StepPrediction {
  double gemm_fwd = 0, gemm_bwd = 0, stream = 0;  // per micro-batch
  // Per micro-batch, part of compute: the forward GEMMs and bandwidth-bound
  // ops of the recomputed blocks run again in backward, and their FLOPs.
  double recompute_gemm = 0, recompute_stream = 0, recompute_flops = 0;
  double compute = 0;  // accum x per micro-batch
  double optimizer_gemm = 0, optimizer_stream = 0;
  double grad_reduce = 0, grad_reduce_exposed = 0, param_gather = 0, expert_all_to_all = 0;
  double context_parallel = 0;  // K/V all-gathers and reduce-scatters (cp > 1)
  double step = 0;
  double tokens_per_second = 0;     // all ranks
  double model_flops_per_rank = 0;  // per step
  double mfu = 0;
  double peak_gflops = 0;
  std::vector<GemmTime> gemms;     // per micro-batch
  std::vector<std::string> notes;  // missing curves, approximations
};

// True when a forward GEMM of model_gemms() named `name` runs again in
// backward under `r`: attention GEMMs (attn.*) for attention and full, MoE
// ones (moe.*: router and experts) for moe and full.
bool recomputes_gemm(Recompute r, const std::string& name);

StepPrediction predict_step(const ZayaConfig& c, const TrainLayout& layout, const GemmModel& gemm);

}  // namespace zaya
