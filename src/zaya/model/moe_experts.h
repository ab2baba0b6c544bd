#pragma once
// The experts of one MoE half-layer (spec §4): dispatch each routed row to its
// expert, one SwiGLU GEMM pair per expert over its rows, and return the
// outputs to their tokens.
//
// One rank (ep = 1): rows are permuted by expert (ExpertPlan) and the local
// experts run on them directly.
// Expert parallel (ep > 1): expert e lives on ep rank e / E_local. The rows,
// grouped by destination, travel with all-to-all-v (exchange counts first),
// are regrouped expert-major on arrival (source ranks in order, tokens in
// order within a source, so the result is deterministic), processed, and sent
// back the same way; the backward pass mirrors both exchanges.

#include <cstdint>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/dist/comm.h"
#include "zaya/model/config.h"
#include "zaya/model/lora.h"
#include "zaya/model/weights.h"
#include "zaya/ops/moe_dispatch.h"
#include "zaya/ops/precision.h"

namespace zaya {

// Row bookkeeping of one layer's exchange (kept for backward).
struct ExpertExchange {
  int64_t ranks = 1;                    // ep group size
  int64_t local_experts = 0;            // E_local
  std::vector<int64_t> counts_WE;       // rows from source rank s for local expert e [ranks * E_local]
  std::vector<int64_t> send_rows;       // [ranks] rows sent to each rank (plan order, contiguous)
  std::vector<int64_t> recv_rows;       // [ranks] rows received from each rank
  std::vector<int64_t> expert_offsets;  // [E_local + 1] expert-major row offsets
  int64_t rows = 0;                     // rows this rank's experts process
};

// What the forward keeps for the backward. The inputs of the GEMMs (the
// routed rows and SwiGLU's output) are kept either in float32 or, with bf16
// GEMMs (keep_bf16, docs/model.md "Precision"), only as the bf16
// rounding the GEMMs read: each local expert's rows then start at
// bf16_offsets[e] and are zero-padded to bf16_padded_rows (ops/bf16_linear.h),
// and their float32 values live in ExpertScratch for the forward only.
struct ExpertActs {
  ExpertExchange exchange;
  float* xe_XD = nullptr;   // expert inputs, expert-major (float32 kept)
  float* h_X2F = nullptr;   // fc1 outputs
  float* act_XF = nullptr;  // swiglu(h) (float32 kept)
  float* y_MD = nullptr;    // expert outputs back in plan order (before gating)
  bool keep_bf16 = false;
  uint16_t* xe_bf16 = nullptr;        // bf16(expert inputs), padded per expert
  uint16_t* act_bf16 = nullptr;       // bf16(swiglu(h)), padded per expert
  std::vector<int64_t> bf16_offsets;  // [E_local + 1] padded row offsets
};

// Scratch shared by all MoE layers.
struct ExpertScratch {
  float* send_MD = nullptr;  // plan-order rows to send
  float* recv_XD = nullptr;  // source-major rows received
  float* ye_XD = nullptr;    // expert outputs / gradients, expert-major
  float* dact_XF = nullptr;
  float* dh_X2F = nullptr;
  float* xe_XD = nullptr;                                       // keep_bf16: the forward's float32 expert inputs
  float* act_XF = nullptr;                                      // keep_bf16: the forward's float32 swiglu(h)
  std::vector<int64_t> counts_a, displs_a, counts_b, displs_b;  // all_to_all_v element counts [ep]
  std::vector<int64_t> plan_counts_E;                           // rows per global expert [E]
  double exchange_seconds = 0;                                  // time in all-to-all exchanges (reset by the caller)
};

// Largest number of rows this rank's experts may receive (dropless: every
// token of the ep group could pick this rank's experts).
inline int64_t expert_row_capacity(const ZayaConfig& c, int64_t tokens, int64_t ep_ranks) {
  return ep_ranks * tokens * c.top_k;
}

// keep_bf16: the GEMM inputs kept as bf16 (every forward then runs with the
// experts' weights in the precision's Bf16Context, and without expert LoRA targets).
void carve_expert_acts(ExpertActs& a, const ZayaConfig& c, int64_t tokens, int64_t ep_ranks, bool keep_bf16,
                       Arena& arena);
void carve_expert_scratch(ExpertScratch& s, const ZayaConfig& c, int64_t tokens, int64_t ep_ranks, bool keep_bf16,
                          Arena& arena);

// y_MD (in a.y_MD) = expert outputs for the rows of `plan` (x_TD rows routed to experts).
// ep: the expert-parallel group, or null for one rank.
// lora: the block's adapters (model/lora.h); with expert targets, each local
// expert e (global w.expert_first + e) adds its own branch to its fc1 / fc2
// over exactly its rows (lora->h keeps their x A^T, expert-major). Null: none.
void experts_forward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const ExpertPlan& plan,
                     const float* x_TD, ExpertActs& a, ExpertScratch& s, Comm* ep, const BlockLora* lora = nullptr);

// Given dy_MD (gradient of the plan-order outputs): adds the experts' weight
// gradients into g (null views: frozen, skipped) and writes dxp_MD, the gradient of the plan-order inputs.
// lora: as in the forward; adds into the local experts' adapter gradients (lora->grads).
void experts_backward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const MoeWeights& g,
                      const ExpertActs& a, ExpertScratch& s, Comm* ep, const float* dy_MD, float* dxp_MD,
                      const BlockLora* lora = nullptr);

}  // namespace zaya
