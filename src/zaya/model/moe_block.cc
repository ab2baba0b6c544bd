#include "zaya/model/moe_block.h"

#include <cmath>

#include "zaya/core/profiler.h"
#include "zaya/core/zero_fill.h"
#include "zaya/model/lora_branch.h"
#include "zaya/ops/routing.h"

namespace zaya {
namespace {

// The router's tensors of a MoE layer: its weights (P = const float) or their gradients (P = float).
template <typename P>
RouterParams<P> router_params(const MoeWeights& w) {
  return {.down_RD = w.down_RD,
          .down_b_R = w.down_b_R,
          .states_scale_R = w.states_scale_R,
          .norm_R = w.eda_norm_R,
          .mlp0_RR = w.mlp0_RR,
          .mlp0_b_R = w.mlp0_b_R,
          .mlp2_RR = w.mlp2_RR,
          .mlp2_b_R = w.mlp2_b_R,
          .mlp4_NR = w.mlp4_NR};
}

RouterShape router_shape(const ZayaConfig& c, int64_t tokens) {
  return {tokens, c.hidden, c.router_hidden, c.router_slots(), c.top_k, c.skip_slot(), c.router_norm_eps};
}

RouterLossOptions router_loss(const MoeLossOptions& loss, float grad_scale) {
  return {loss.switch_aux_coeff, loss.z_loss_coeff, grad_scale};
}

LoraTarget router_target(RouterMatrix m) {
  switch (m) {
    case RouterMatrix::kDown: return LoraTarget::kRouterDown;
    case RouterMatrix::kMlp0: return LoraTarget::kRouterFc1;
    case RouterMatrix::kMlp2: return LoraTarget::kRouterFc2;
    case RouterMatrix::kMlp4: return LoraTarget::kRouterOut;
  }
  return LoraTarget::kRouterDown;
}

// The router's products with the block's router adapters (model/lora.h):
// each product, then its branch y += s drop(x) A^T B^T (ops/lora_linear.h);
// backward adds the branches' input and adapter gradients.
class LoraRouterProducts final : public RouterProducts<float>, public RouterBranches<float> {
 public:
  LoraRouterProducts(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const BlockLora* lora)
      : c_(c), arrays_(precision, router_params<const float>(w)), lora_(lora) {}
  void apply(RouterMatrix m, float* y_TO, const float* x_TI, int64_t tokens, int64_t in, int64_t out) override {
    arrays_.apply(m, y_TO, x_TI, tokens, in, out);
    lora_branch_forward(y_TO, x_TI, lora_branch(c_, lora_, router_target(m), tokens, out, LoraPass::kForward));
  }
  void backward(RouterMatrix m, float* dx_TI, const float* dy_TO, const float* x_TI, int64_t tokens, int64_t,
                int64_t out) override {
    lora_branch_backward(dx_TI, dy_TO, x_TI,
                         lora_branch(c_, lora_, router_target(m), tokens, out, LoraPass::kBackward));
  }

 private:
  const ZayaConfig& c_;
  RouterArrayProducts<float> arrays_;
  const BlockLora* lora_;
};

}  // namespace

int64_t skip_input_slot(const ZayaConfig& c) { return c.skip_output_zero ? -1 : c.skip_slot(); }

void carve_moe_acts(MoeActs& a, const ZayaConfig& c, int64_t B, int64_t S, int64_t ep_ranks, bool keep_bf16,
                    Arena& arena) {
  const int64_t T = B * S, R = c.router_hidden, N = c.router_slots();
  RouterActs<float>& r = a.router;
  r.r_TR = arena.carve(T * R);
  r.rstd_T = arena.carve(T);
  r.rn_TR = arena.carve(T * R);
  r.u1_TR = arena.carve(T * R);
  r.g1_TR = arena.carve(T * R);
  r.u2_TR = arena.carve(T * R);
  r.g2_TR = arena.carve(T * R);
  r.logits_TN = arena.carve(T * N);
  r.probs_TN = arena.carve(T * N);
  r.gate_TJ = arena.carve(T * c.top_k);
  carve_expert_acts(a.experts, c, T, ep_ranks, keep_bf16, arena);
  if (r.r_TR == nullptr) return;  // measuring only
  a.choice_TJ.assign(T * c.top_k, kNoExpert);
  r.choice_TJ = a.choice_TJ.data();
  a.plan.reserve(c.experts, T, c.top_k);
}

void carve_moe_scratch(MoeScratch& s, const ZayaConfig& c, int64_t B, int64_t S, int64_t ep_ranks, bool keep_bf16,
                       Arena& arena) {
  const int64_t T = B * S, R = c.router_hidden, N = c.router_slots(), rows = T * c.top_k, D = c.hidden;
  carve_expert_scratch(s.experts, c, T, ep_ranks, keep_bf16, arena);
  s.dy_MD = arena.carve(rows * D);
  s.dxp_MD = arena.carve(rows * D);
  s.dgate_TJ = arena.carve(T * c.top_k);
  RouterScratch<float>& r = s.router;
  r.dprobs_TN = arena.carve(T * N);
  r.dlogits_TN = arena.carve(T * N);
  r.dg2_TR = arena.carve(T * R);
  r.du2_TR = arena.carve(T * R);
  r.dg1_TR = arena.carve(T * R);
  r.du1_TR = arena.carve(T * R);
  r.drn_TR = arena.carve(T * R);
  r.dr_TR = arena.carve(T * R);
  s.eda_carry_TR = arena.carve(T * R);
}

double moe_block_forward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const float* bias_N,
                         MoeActs& a, MoeScratch& s, const BatchShape& b, const float* x_TD, const float* r_prev_TR,
                         float* out_TD, const MoeLossOptions& loss, RoutingStats& stats, Comm* ep,
                         const BlockLora* lora, const RoutingReplay* replay) {
  const int64_t T = b.tokens(), D = c.hidden, N = c.router_slots(), J = c.top_k;
  // ---- router (spec §4) ----
  ZAYA_PROFILE_SCOPE("moe.fwd");
  const RouterWeights<float> rw = router_params<const float>(w);
  LoraRouterProducts products(c, precision, w, lora);
  RouterActs<float>& ra = a.router;
  RoutingReplay counts;
  if (replay != nullptr) counts = {replay->recorded_TJ, replay->force};
  const RouterLosses losses = router_forward<float>(rw, products, router_shape(c, T), x_TD, r_prev_TR, bias_N, ra,
                                                    router_loss(loss, 1.0f), false, replay ? &counts : nullptr);
  stats.replay_compared += double(counts.compared);
  stats.replay_flips += double(counts.flips);
  stats.replay_used_flips += double(counts.used_flips);

  // Routing statistics and optional balancing losses.
  for (int64_t i = 0; i < T * J; ++i)
    if (ra.choice_TJ[i] != kNoExpert) stats.choices_N[ra.choice_TJ[i]] += 1;
  double entropy = 0;
  for (int64_t i = 0; i < T * N; ++i)
    if (ra.probs_TN[i] > 0) entropy -= double(ra.probs_TN[i]) * std::log(double(ra.probs_TN[i]));
  stats.entropy_sum += entropy;
  stats.tokens += double(T);
  double extra = 0;
  if (loss.switch_aux_coeff > 0) {
    stats.aux_loss += losses.switch_aux;
    extra += losses.switch_aux;
  }
  if (loss.z_loss_coeff > 0) {
    stats.z_loss += losses.z;
    extra += losses.z;
  }

  // ---- experts: permute, one GEMM pair per expert (here or on their ep rank), combine (spec §4) ----
  build_expert_plan(a.plan, ra.choice_TJ, T, J);
  experts_forward(c, precision, w, a.plan, x_TD, a.experts, s.experts, ep, lora);
  combine_forward<float>(out_TD, a.experts.y_MD, x_TD, ra.gate_TJ, ra.choice_TJ, a.plan, T, J, D, skip_input_slot(c));
  return extra;
}

void moe_block_backward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const MoeWeights& g,
                        const MoeActs& a, MoeScratch& s, const BatchShape& b, const float* x_TD, const float* r_prev_TR,
                        const float* dout_TD, float* dx_TD, const MoeLossOptions& loss, float aux_grad_scale, Comm* ep,
                        const BlockLora* lora) {
  const int64_t T = b.tokens(), D = c.hidden, J = c.top_k;
  ZAYA_PROFILE_SCOPE("moe.bwd");
  // ---- experts ----
  zero_fill(s.dgate_TJ, T * J);
  combine_backward<float>(s.dy_MD, s.dgate_TJ, dx_TD, dout_TD, a.experts.y_MD, x_TD, a.router.gate_TJ,
                          a.router.choice_TJ, a.plan, T, J, D, skip_input_slot(c));
  experts_backward(c, precision, w, g, a.experts, s.experts, ep, s.dy_MD, s.dxp_MD, lora);
  scatter_add_rows<float>(dx_TD, s.dxp_MD, a.plan, T, J, D);

  // ---- router: consumes the next layer's EDA carry and leaves there the previous layer's ----
  LoraRouterProducts branches(c, precision, w, lora);
  router_backward<float>(precision, router_params<const float>(w), router_params<float>(g), router_shape(c, T),
                         a.router, s.router, x_TD, r_prev_TR, s.dgate_TJ, s.eda_carry_TR, dx_TD, s.eda_carry_TR,
                         router_loss(loss, aux_grad_scale), lora != nullptr ? &branches : nullptr);
}

}  // namespace zaya
