#pragma once
// Router selection and the optional balancing losses (spec §4, docs/prior-art.md §6).
//
// Selection: slot = argmax_e (p[e] + bias[e]) over E experts + 1 skip slot;
// the biases only choose, the gate is the unbiased probability p[slot]. With
// top_k > 1 the slots are taken in descending biased score and, as in the
// reference, once the skip slot is taken the remaining choices are void (-1).

#include <cstdint>

namespace zaya {

inline constexpr int32_t kNoExpert = -1;
// A routing record's entry where nothing was recorded: the router's own choice stands (RoutingReplay).
inline constexpr int32_t kNotRecorded = -2;

// choice_TJ[t, k] in [0, slots) or kNoExpert; gate_TJ[t, k] = probs[t, choice] (0 if void).
// skip_slot = index of the skip slot, or -1 if the layer has none.
template <typename T>
void router_select(int32_t* choice_TJ, T* gate_TJ, const T* probs_TN, const float* bias_N, int64_t tokens,
                   int64_t slots, int64_t top_k, int64_t skip_slot);

// Routing replay (docs/rl.md "Routing replay"): the choices a decoder made,
// checked against (and optionally forced onto) the router's own. recorded_TJ
// holds one token's top_k choices per row as router_select writes them (a
// slot or kNoExpert), or kNotRecorded in every entry of a row without a record.
// A recorded row counts once in `compared`, and in `flips` when the set of slots
// the router chose differs from the recorded set. With force, a recorded row's
// choices become the recorded ones and each gate the router's own unbiased
// probability of the forced slot, p[slot] (0 for kNoExpert): the gate's
// gradient reaches the router through p as it does for its own choice.
// `used_flips` counts the recorded rows whose choices after the call differ
// from the record (0 when forced; `flips` otherwise).
struct RoutingReplay {
  const int32_t* recorded_TJ = nullptr;
  bool force = false;
  int64_t compared = 0, flips = 0, used_flips = 0;  // added to by replay_routing
};

template <typename T>
void replay_routing(RoutingReplay& replay, int32_t* choice_TJ, T* gate_TJ, const T* probs_TN, int64_t tokens,
                    int64_t slots, int64_t top_k);

// Softmax backward: dx_TN += p * (dp - sum(p * dp)).
template <typename T>
void softmax_rows_backward(T* dx_TN, const T* dp_TN, const T* p_TN, int64_t rows, int64_t n);

// Switch-Transformer load-balancing loss over all slots:
//   L = coeff * N * sum_i f_i * P_i,  f_i = share of choices on slot i,
//   P_i = mean_t p_{t,i}; differentiable through P only.
// Returns L; adds dL/dp * grad_scale into dprobs_TN when dprobs_TN is not null.
template <typename T>
T switch_aux_loss(T* dprobs_TN, const T* probs_TN, const int32_t* choice_TJ, int64_t tokens, int64_t slots,
                  int64_t top_k, T coeff, T grad_scale);

// Router z-loss (ST-MoE): L = coeff * mean_t logsumexp(z_t)^2. Returns L; adds
// dL/dz * grad_scale into dlogits_TN (needs probs = softmax(z)).
template <typename T>
T router_z_loss(T* dlogits_TN, const T* logits_TN, const T* probs_TN, int64_t tokens, int64_t slots, T coeff,
                T grad_scale);

}  // namespace zaya
