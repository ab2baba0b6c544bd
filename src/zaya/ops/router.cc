#include "zaya/ops/router.h"

#include <cstring>

#include "zaya/core/zero_fill.h"
#include "zaya/ops/activations.h"
#include "zaya/ops/cross_entropy.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/reduce.h"
#include "zaya/ops/rmsnorm.h"
#include "zaya/ops/routing.h"
#include "zaya/ops/serial_if.h"

namespace zaya {
namespace {

template <typename T>
void zero(T* p, int64_t n) {
  zero_fill(p, n);
}

// y_TO += b_O
template <typename T>
void add_bias(T* y_TO, const T* b_O, int64_t rows, int64_t out, bool serial) {
  parallel_for(rows, serial ? 0 : rows * out, [&](int64_t t) {
    T* y = y_TO + t * out;
#pragma omp simd
    for (int64_t o = 0; o < out; ++o) y[o] += b_O[o];
  });
}

}  // namespace

template <typename T>
void RouterArrayProducts<T>::apply(RouterMatrix m, T* y_TO, const T* x_TI, int64_t tokens, int64_t in, int64_t out) {
  const T* w_OI = m == RouterMatrix::kDown   ? w_.down_RD
                  : m == RouterMatrix::kMlp0 ? w_.mlp0_RR
                  : m == RouterMatrix::kMlp2 ? w_.mlp2_RR
                                             : w_.mlp4_NR;
  linear_forward<T>(precision_, y_TO, x_TI, w_OI, tokens, in, out);
}

template <typename T>
RouterLosses router_forward(const RouterWeights<T>& w, RouterProducts<T>& products, const RouterShape& s, const T* x_TD,
                            const T* r_prev_TR, const float* bias_N, RouterActs<T>& a, const RouterLossOptions& loss,
                            bool serial, RoutingReplay* replay) {
  const int64_t Tn = s.tokens, D = s.hidden, R = s.width, N = s.slots, J = s.top_k;
  products.apply(RouterMatrix::kDown, a.r_TR, x_TD, Tn, D, R);
  add_bias(a.r_TR, w.down_b_R, Tn, R, serial);
  if (w.states_scale_R != nullptr && r_prev_TR != nullptr) {  // EDA (spec §4): r += s * r_prev
    parallel_for(Tn, serial ? 0 : 2 * Tn * R, [&](int64_t t) {
      T* r = a.r_TR + t * R;
      const T* rp = r_prev_TR + t * R;
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) r[i] += w.states_scale_R[i] * rp[i];
    });
  }
  {
    SerialIf guard(serial);
    rmsnorm_forward<T>(a.rn_TR, a.rstd_T, a.r_TR, w.norm_R, Tn, R, T(s.norm_eps));
  }
  products.apply(RouterMatrix::kMlp0, a.u1_TR, a.rn_TR, Tn, R, R);
  add_bias(a.u1_TR, w.mlp0_b_R, Tn, R, serial);
  {
    SerialIf guard(serial);
    gelu_forward<T>(a.g1_TR, a.u1_TR, Tn * R);
  }
  products.apply(RouterMatrix::kMlp2, a.u2_TR, a.g1_TR, Tn, R, R);
  add_bias(a.u2_TR, w.mlp2_b_R, Tn, R, serial);
  {
    SerialIf guard(serial);
    gelu_forward<T>(a.g2_TR, a.u2_TR, Tn * R);
  }
  products.apply(RouterMatrix::kMlp4, a.logits_TN, a.g2_TR, Tn, R, N);
  SerialIf guard(serial);
  softmax_rows<T>(a.probs_TN, a.logits_TN, Tn, N);
  router_select<T>(a.choice_TJ, a.gate_TJ, a.probs_TN, bias_N, Tn, N, J, s.skip_slot);
  if (replay != nullptr) replay_routing<T>(*replay, a.choice_TJ, a.gate_TJ, a.probs_TN, Tn, N, J);
  RouterLosses out;
  if (loss.switch_aux_coeff > 0)
    out.switch_aux = switch_aux_loss<T>(nullptr, a.probs_TN, a.choice_TJ, Tn, N, J, T(loss.switch_aux_coeff), T(1));
  if (loss.z_loss_coeff > 0)
    out.z = router_z_loss<T>(nullptr, a.logits_TN, a.probs_TN, Tn, N, T(loss.z_loss_coeff), T(1));
  return out;
}

template <typename T>
void router_backward(const Precision& precision, const RouterWeights<T>& w, const RouterGrads<T>& g,
                     const RouterShape& s, const RouterActs<T>& a, RouterScratch<T>& sc, const T* x_TD,
                     const T* r_prev_TR, const T* dgate_TJ, const T* dr_next_TR, T* dx_TD, T* dr_prev_TR,
                     const RouterLossOptions& loss, RouterBranches<T>* branches) {
  const int64_t Tn = s.tokens, D = s.hidden, R = s.width, N = s.slots, J = s.top_k;
  // The gate is p[slot], so its gradient enters the softmax at that slot.
  zero(sc.dprobs_TN, Tn * N);
  for (int64_t t = 0; t < Tn; ++t)
    for (int64_t k = 0; k < J; ++k) {
      const int32_t slot = a.choice_TJ[t * J + k];
      if (slot != kNoExpert) sc.dprobs_TN[t * N + slot] += dgate_TJ[t * J + k];
    }
  if (loss.switch_aux_coeff > 0)
    switch_aux_loss<T>(sc.dprobs_TN, a.probs_TN, a.choice_TJ, Tn, N, J, T(loss.switch_aux_coeff), T(loss.grad_scale));
  zero(sc.dlogits_TN, Tn * N);
  softmax_rows_backward<T>(sc.dlogits_TN, sc.dprobs_TN, a.probs_TN, Tn, N);
  if (loss.z_loss_coeff > 0)
    router_z_loss<T>(sc.dlogits_TN, a.logits_TN, a.probs_TN, Tn, N, T(loss.z_loss_coeff), T(loss.grad_scale));
  // The MLP.
  zero(sc.dg2_TR, Tn * R);
  linear_backward<T>(precision, sc.dg2_TR, g.mlp4_NR, sc.dlogits_TN, a.g2_TR, w.mlp4_NR, Tn, R, N);
  if (branches != nullptr) branches->backward(RouterMatrix::kMlp4, sc.dg2_TR, sc.dlogits_TN, a.g2_TR, Tn, R, N);
  zero(sc.du2_TR, Tn * R);
  gelu_backward<T>(sc.du2_TR, sc.dg2_TR, a.u2_TR, Tn * R);
  zero(sc.dg1_TR, Tn * R);
  linear_backward<T>(precision, sc.dg1_TR, g.mlp2_RR, sc.du2_TR, a.g1_TR, w.mlp2_RR, Tn, R, R);
  if (branches != nullptr) branches->backward(RouterMatrix::kMlp2, sc.dg1_TR, sc.du2_TR, a.g1_TR, Tn, R, R);
  column_sum<T>(g.mlp2_b_R, sc.du2_TR, Tn, R);
  zero(sc.du1_TR, Tn * R);
  gelu_backward<T>(sc.du1_TR, sc.dg1_TR, a.u1_TR, Tn * R);
  zero(sc.drn_TR, Tn * R);
  linear_backward<T>(precision, sc.drn_TR, g.mlp0_RR, sc.du1_TR, a.rn_TR, w.mlp0_RR, Tn, R, R);
  if (branches != nullptr) branches->backward(RouterMatrix::kMlp0, sc.drn_TR, sc.du1_TR, a.rn_TR, Tn, R, R);
  column_sum<T>(g.mlp0_b_R, sc.du1_TR, Tn, R);
  // The norm; dr starts from what the next MoE layer's EDA sends back.
  if (dr_next_TR != nullptr) {
    std::memcpy(sc.dr_TR, dr_next_TR, sizeof(T) * Tn * R);
  } else {
    zero(sc.dr_TR, Tn * R);
  }
  rmsnorm_backward<T>(sc.dr_TR, g.norm_R, sc.drn_TR, a.r_TR, w.norm_R, a.rstd_T, Tn, R);
  // EDA: r = r_down + s * r_prev  =>  ds += sum_t r_prev * dr,  dr_prev = s * dr.
  if (w.states_scale_R != nullptr && r_prev_TR != nullptr) {
    column_sum_product<T>(g.states_scale_R, r_prev_TR, sc.dr_TR, nullptr, Tn, R);
    if (dr_prev_TR != nullptr) {
      parallel_for(Tn, 2 * Tn * R, [&](int64_t t) {
        for (int64_t i = 0; i < R; ++i) dr_prev_TR[t * R + i] = w.states_scale_R[i] * sc.dr_TR[t * R + i];
      });
    }
  } else if (dr_prev_TR != nullptr) {
    zero(dr_prev_TR, Tn * R);
  }
  // The down projection.
  linear_backward<T>(precision, dx_TD, g.down_RD, sc.dr_TR, x_TD, w.down_RD, Tn, D, R);
  if (branches != nullptr) branches->backward(RouterMatrix::kDown, dx_TD, sc.dr_TR, x_TD, Tn, D, R);
  column_sum<T>(g.down_b_R, sc.dr_TR, Tn, R);
}

template class RouterArrayProducts<float>;
template class RouterArrayProducts<double>;
template RouterLosses router_forward<float>(const RouterWeights<float>&, RouterProducts<float>&, const RouterShape&,
                                            const float*, const float*, const float*, RouterActs<float>&,
                                            const RouterLossOptions&, bool, RoutingReplay*);
template RouterLosses router_forward<double>(const RouterWeights<double>&, RouterProducts<double>&, const RouterShape&,
                                             const double*, const double*, const float*, RouterActs<double>&,
                                             const RouterLossOptions&, bool, RoutingReplay*);
template void router_backward<float>(const Precision&, const RouterWeights<float>&, const RouterGrads<float>&,
                                     const RouterShape&, const RouterActs<float>&, RouterScratch<float>&, const float*,
                                     const float*, const float*, const float*, float*, float*, const RouterLossOptions&,
                                     RouterBranches<float>*);
template void router_backward<double>(const Precision&, const RouterWeights<double>&, const RouterGrads<double>&,
                                      const RouterShape&, const RouterActs<double>&, RouterScratch<double>&,
                                      const double*, const double*, const double*, const double*, double*, double*,
                                      const RouterLossOptions&, RouterBranches<double>*);

}  // namespace zaya
