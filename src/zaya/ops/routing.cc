#include "zaya/ops/routing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "zaya/core/error.h"
#include "zaya/core/exp_f32.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {

template <typename T>
void router_select(int32_t* choice_TJ, T* gate_TJ, const T* probs, const float* bias, int64_t tokens, int64_t slots,
                   int64_t top_k, int64_t skip_slot) {
  ZAYA_ASSERT(top_k >= 1 && top_k <= slots && slots <= 64);
  parallel_for(tokens, tokens * slots, [&](int64_t t) {
    const T* p = probs + t * slots;
    uint64_t taken = 0;  // bit mask of slots already chosen
    bool skipped = false;
    for (int64_t k = 0; k < top_k; ++k) {
      int32_t* choice = choice_TJ + t * top_k + k;
      T* gate = gate_TJ + t * top_k + k;
      if (skipped) {
        *choice = kNoExpert;
        *gate = T(0);
        continue;
      }
      // Biased score in float, as the reference adds fp32 biases to fp32 probabilities.
      int64_t best = -1;
      float best_score = -std::numeric_limits<float>::infinity();
      for (int64_t e = 0; e < slots; ++e) {
        if (taken & (uint64_t(1) << e)) continue;
        float score = float(p[e]) + bias[e];
        if (best < 0 || score > best_score) {
          best = e;
          best_score = score;
        }
      }
      taken |= uint64_t(1) << best;
      *choice = int32_t(best);
      *gate = p[best];
      if (best == skip_slot) skipped = true;
    }
  });
}

namespace {

// Whether two rows of top_k choices hold the same slots (in any order).
bool same_choices(const int32_t* a, const int32_t* b, int64_t top_k) {
  for (int64_t i = 0; i < top_k; ++i)
    if (std::count(a, a + top_k, a[i]) != std::count(b, b + top_k, a[i])) return false;
  return true;
}

}  // namespace

template <typename T>
void replay_routing(RoutingReplay& r, int32_t* choice_TJ, T* gate_TJ, const T* probs, int64_t tokens, int64_t slots,
                    int64_t top_k) {
  for (int64_t t = 0; t < tokens; ++t) {
    const int32_t* rec = r.recorded_TJ + t * top_k;
    if (rec[0] == kNotRecorded) continue;
    int32_t* choice = choice_TJ + t * top_k;
    const bool same = same_choices(choice, rec, top_k);
    ++r.compared;
    r.flips += same ? 0 : 1;
    if (r.force && !same)
      for (int64_t k = 0; k < top_k; ++k) {
        ZAYA_CHECK(rec[k] == kNoExpert || (rec[k] >= 0 && rec[k] < slots),
                   "routing record: choice {} of token {} is not a slot of {} (nor {})", rec[k], t, slots, kNoExpert);
        choice[k] = rec[k];
        gate_TJ[t * top_k + k] = rec[k] == kNoExpert ? T(0) : probs[t * slots + rec[k]];
      }
    r.used_flips += same_choices(choice, rec, top_k) ? 0 : 1;
  }
}

template <typename T>
void softmax_rows_backward(T* dx, const T* dp, const T* p, int64_t rows, int64_t n) {
  parallel_for(rows, 3 * rows * n, [&](int64_t r) {
    const T* pr = p + r * n;
    const T* gr = dp + r * n;
    T dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += pr[i] * gr[i];
    for (int64_t i = 0; i < n; ++i) dx[r * n + i] += pr[i] * (gr[i] - dot);
  });
}

template <typename T>
T switch_aux_loss(T* dprobs, const T* probs, const int32_t* choice_TJ, int64_t tokens, int64_t slots, int64_t top_k,
                  T coeff, T grad_scale) {
  ZAYA_ASSERT(slots <= 64);
  T f[64] = {}, P[64] = {};
  int64_t choices = 0;
  for (int64_t i = 0; i < tokens * top_k; ++i)
    if (choice_TJ[i] != kNoExpert) {
      f[choice_TJ[i]] += 1;
      ++choices;
    }
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < slots; ++e) P[e] += probs[t * slots + e];
  T loss = 0;
  for (int64_t e = 0; e < slots; ++e) {
    f[e] = choices > 0 ? f[e] / T(choices) : T(0);
    P[e] /= T(tokens);
    loss += f[e] * P[e];
  }
  loss *= coeff * T(slots);
  if (dprobs != nullptr) {
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t e = 0; e < slots; ++e) dprobs[t * slots + e] += grad_scale * coeff * T(slots) * f[e] / T(tokens);
  }
  return loss;
}

template <typename T>
T router_z_loss(T* dlogits, const T* logits, const T* probs, int64_t tokens, int64_t slots, T coeff, T grad_scale) {
  T loss = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const T* z = logits + t * slots;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t e = 0; e < slots; ++e) mx = std::max(mx, z[e]);
    T sum = 0;
    for (int64_t e = 0; e < slots; ++e) sum += exp_of(z[e] - mx);
    T lse = mx + std::log(sum);
    loss += lse * lse;
    if (dlogits != nullptr) {
      T c = grad_scale * coeff * T(2) * lse / T(tokens);
      for (int64_t e = 0; e < slots; ++e) dlogits[t * slots + e] += c * probs[t * slots + e];
    }
  }
  return coeff * loss / T(tokens);
}

template void router_select<float>(int32_t*, float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void router_select<double>(int32_t*, double*, const double*, const float*, int64_t, int64_t, int64_t, int64_t);
template void replay_routing<float>(RoutingReplay&, int32_t*, float*, const float*, int64_t, int64_t, int64_t);
template void replay_routing<double>(RoutingReplay&, int32_t*, double*, const double*, int64_t, int64_t, int64_t);
template void softmax_rows_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void softmax_rows_backward<double>(double*, const double*, const double*, int64_t, int64_t);
template float switch_aux_loss<float>(float*, const float*, const int32_t*, int64_t, int64_t, int64_t, float, float);
template double switch_aux_loss<double>(double*, const double*, const int32_t*, int64_t, int64_t, int64_t, double,
                                        double);
template float router_z_loss<float>(float*, const float*, const float*, int64_t, int64_t, float, float);
template double router_z_loss<double>(double*, const double*, const double*, int64_t, int64_t, double, double);

}  // namespace zaya
