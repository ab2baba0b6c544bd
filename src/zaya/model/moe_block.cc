#include "zaya/model/moe_block.h"

#include <cmath>
#include <cstring>

#include "zaya/core/profiler.h"

#include "zaya/ops/activations.h"
#include "zaya/ops/cross_entropy.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/reduce.h"
#include "zaya/ops/rmsnorm.h"
#include "zaya/ops/routing.h"

namespace zaya {
namespace {

void zero(float* p, int64_t n) { std::memset(p, 0, sizeof(float) * n); }

// y_TO = x W^T + b
void linear_bias(float* y, const float* x, const float* w, const float* bias, int64_t T, int64_t in, int64_t out) {
  linear_forward<float>(y, x, w, T, in, out);
  if (bias == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) y[t * out + o] += bias[o];
}

}  // namespace

void carve_moe_acts(MoeActs& a, const ZayaConfig& c, int64_t B, int64_t S, int64_t ep_ranks, Arena& arena) {
  const int64_t T = B * S, R = c.router_hidden, N = c.router_slots();
  a.r_TR = arena.carve(T * R);
  a.r_rstd_T = arena.carve(T);
  a.rn_TR = arena.carve(T * R);
  a.u1_TR = arena.carve(T * R);
  a.g1_TR = arena.carve(T * R);
  a.u2_TR = arena.carve(T * R);
  a.g2_TR = arena.carve(T * R);
  a.logits_TN = arena.carve(T * N);
  a.probs_TN = arena.carve(T * N);
  a.gate_TK = arena.carve(T * c.top_k);
  carve_expert_acts(a.experts, c, T, ep_ranks, arena);
  if (a.r_TR == nullptr) return;  // measuring only
  a.choice_TK.assign(T * c.top_k, kNoExpert);
  a.plan.reserve(c.experts, T, c.top_k);
}

void carve_moe_scratch(MoeScratch& s, const ZayaConfig& c, int64_t B, int64_t S, int64_t ep_ranks, Arena& arena) {
  const int64_t T = B * S, R = c.router_hidden, N = c.router_slots(), rows = T * c.top_k, D = c.hidden;
  carve_expert_scratch(s.experts, c, T, ep_ranks, arena);
  s.dy_RD = arena.carve(rows * D);
  s.dxp_RD = arena.carve(rows * D);
  s.dgate_TK = arena.carve(T * c.top_k);
  s.dprobs_TN = arena.carve(T * N);
  s.dlogits_TN = arena.carve(T * N);
  s.dg2_TR = arena.carve(T * R);
  s.du2_TR = arena.carve(T * R);
  s.dg1_TR = arena.carve(T * R);
  s.du1_TR = arena.carve(T * R);
  s.drn_TR = arena.carve(T * R);
  s.dr_TR = arena.carve(T * R);
  s.eda_carry_TR = arena.carve(T * R);
}

double moe_block_forward(const ZayaConfig& c, const MoeWeights& w, const float* bias_N, MoeActs& a, MoeScratch& s,
                         const BatchShape& b, const float* x_TD, const float* r_prev_TR, float* out_TD,
                         const MoeLossOptions& loss, RoutingStats& stats, Comm* ep) {
  const int64_t T = b.tokens(), D = c.hidden, R = c.router_hidden, N = c.router_slots(), K = c.top_k;
  // ---- router (spec §4) ----
  ZAYA_PROFILE_SCOPE("moe.fwd");
  linear_bias(a.r_TR, x_TD, w.down_RD, w.down_b_R, T, D, R);
  if (w.states_scale_R != nullptr && r_prev_TR != nullptr) {  // EDA: r += s * r_prev
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < R; ++i) a.r_TR[t * R + i] += w.states_scale_R[i] * r_prev_TR[t * R + i];
  }
  rmsnorm_forward<float>(a.rn_TR, a.r_rstd_T, a.r_TR, w.eda_norm_R, T, R, float(c.router_norm_eps));
  linear_bias(a.u1_TR, a.rn_TR, w.mlp0_RR, w.mlp0_b_R, T, R, R);
  gelu_forward<float>(a.g1_TR, a.u1_TR, T * R);
  linear_bias(a.u2_TR, a.g1_TR, w.mlp2_RR, w.mlp2_b_R, T, R, R);
  gelu_forward<float>(a.g2_TR, a.u2_TR, T * R);
  linear_forward<float>(a.logits_TN, a.g2_TR, w.mlp4_NR, T, R, N);
  softmax_rows<float>(a.probs_TN, a.logits_TN, T, N);
  router_select<float>(a.choice_TK.data(), a.gate_TK, a.probs_TN, bias_N, T, N, K, c.skip_slot());

  // Routing statistics and optional balancing losses.
  for (int64_t i = 0; i < T * K; ++i)
    if (a.choice_TK[i] != kNoExpert) stats.choices_N[a.choice_TK[i]] += 1;
  double entropy = 0;
  for (int64_t i = 0; i < T * N; ++i)
    if (a.probs_TN[i] > 0) entropy -= double(a.probs_TN[i]) * std::log(double(a.probs_TN[i]));
  stats.entropy_sum += entropy;
  stats.tokens += double(T);
  double extra = 0;
  if (loss.switch_aux_coeff > 0) {
    double l = switch_aux_loss<float>(nullptr, a.probs_TN, a.choice_TK.data(), T, N, K, loss.switch_aux_coeff, 1);
    stats.aux_loss += l;
    extra += l;
  }
  if (loss.z_loss_coeff > 0) {
    double l = router_z_loss<float>(nullptr, a.logits_TN, a.probs_TN, T, N, loss.z_loss_coeff, 1);
    stats.z_loss += l;
    extra += l;
  }

  // ---- experts: permute, one GEMM pair per expert (here or on their ep rank), combine (spec §4) ----
  build_expert_plan(a.plan, a.choice_TK.data(), T, K);
  experts_forward(c, w, a.plan, x_TD, a.experts, s.experts, ep);
  combine_forward<float>(out_TD, a.experts.y_RD, x_TD, a.gate_TK, a.choice_TK.data(), a.plan, T, K, D, c.skip_slot());
  return extra;
}

void moe_block_backward(const ZayaConfig& c, const MoeWeights& w, const MoeWeights& g, const MoeActs& a, MoeScratch& s,
                        const BatchShape& b, const float* x_TD, const float* r_prev_TR, const float* dout_TD,
                        float* dx_TD, const MoeLossOptions& loss, float aux_grad_scale, Comm* ep) {
  const int64_t T = b.tokens(), D = c.hidden, R = c.router_hidden, N = c.router_slots(), K = c.top_k;
  ZAYA_PROFILE_SCOPE("moe.bwd");
  // ---- experts ----
  zero(s.dgate_TK, T * K);
  combine_backward<float>(s.dy_RD, s.dgate_TK, dx_TD, dout_TD, a.experts.y_RD, x_TD, a.gate_TK, a.choice_TK.data(),
                          a.plan, T, K, D, c.skip_slot());
  experts_backward(c, w, g, a.experts, s.experts, ep, s.dy_RD, s.dxp_RD);
  scatter_add_rows<float>(dx_TD, s.dxp_RD, a.plan, T, K, D);

  // ---- router: the gate is p[slot], so its gradient enters the softmax at that slot ----
  zero(s.dprobs_TN, T * N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int32_t slot = a.choice_TK[t * K + k];
      if (slot != kNoExpert) s.dprobs_TN[t * N + slot] += s.dgate_TK[t * K + k];
    }
  if (loss.switch_aux_coeff > 0)
    switch_aux_loss<float>(s.dprobs_TN, a.probs_TN, a.choice_TK.data(), T, N, K, loss.switch_aux_coeff, aux_grad_scale);
  zero(s.dlogits_TN, T * N);
  softmax_rows_backward<float>(s.dlogits_TN, s.dprobs_TN, a.probs_TN, T, N);
  if (loss.z_loss_coeff > 0)
    router_z_loss<float>(s.dlogits_TN, a.logits_TN, a.probs_TN, T, N, loss.z_loss_coeff, aux_grad_scale);
  // router MLP
  zero(s.dg2_TR, T * R);
  linear_backward<float>(s.dg2_TR, g.mlp4_NR, s.dlogits_TN, a.g2_TR, w.mlp4_NR, T, R, N);
  zero(s.du2_TR, T * R);
  gelu_backward<float>(s.du2_TR, s.dg2_TR, a.u2_TR, T * R);
  zero(s.dg1_TR, T * R);
  linear_backward<float>(s.dg1_TR, g.mlp2_RR, s.du2_TR, a.g1_TR, w.mlp2_RR, T, R, R);
  column_sum<float>(g.mlp2_b_R, s.du2_TR, T, R);
  zero(s.du1_TR, T * R);
  gelu_backward<float>(s.du1_TR, s.dg1_TR, a.u1_TR, T * R);
  zero(s.drn_TR, T * R);
  linear_backward<float>(s.drn_TR, g.mlp0_RR, s.du1_TR, a.rn_TR, w.mlp0_RR, T, R, R);
  column_sum<float>(g.mlp0_b_R, s.du1_TR, T, R);
  // RMSNorm of the router state; dr starts from the next layer's EDA carry.
  std::memcpy(s.dr_TR, s.eda_carry_TR, sizeof(float) * T * R);
  rmsnorm_backward<float>(s.dr_TR, g.eda_norm_R, s.drn_TR, a.r_TR, w.eda_norm_R, a.r_rstd_T, T, R);
  // EDA: r = r_down + s * r_prev  =>  ds += sum r_prev * dr,  carry = s * dr
  if (w.states_scale_R != nullptr && r_prev_TR != nullptr) {
    column_sum_product<float>(g.states_scale_R, r_prev_TR, s.dr_TR, nullptr, T, R);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < R; ++i) s.eda_carry_TR[t * R + i] = w.states_scale_R[i] * s.dr_TR[t * R + i];
  } else {
    zero(s.eda_carry_TR, T * R);
  }
  // down projection
  linear_backward<float>(dx_TD, g.down_RD, s.dr_TR, x_TD, w.down_RD, T, D, R);
  column_sum<float>(g.down_b_R, s.dr_TR, T, R);
}

}  // namespace zaya
