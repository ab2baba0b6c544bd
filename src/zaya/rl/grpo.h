#pragma once
// The maths of GRPO (docs/rl.md): group-normalised advantages and the
// per-token weights of the clipped policy-ratio loss, which the trainer's
// backward applies to its cross-entropy gradient
// (ModelWorkspace::set_token_weights). No model, no files: tested alone.
//
// Advantages. The G samples of one prompt form a group; sample i's advantage
// is A_i = (r_i - mean) / (std + 1e-4) (std: the group's population standard
// deviation), or A_i = r_i - mean without the division (std_normalize =
// false, "Dr. GRPO"). A group whose rewards are all equal has A = 0.
//
// Loss, over the completion tokens t of the step (N of them; the token-level
// mean), with logp the trainer's log-probability of the sampled token:
//
//   ratio_t = exp(logp_t - logp_old_t)
//   L = (1/N) sum_t [ -min(ratio_t A_t, clip(ratio_t, 1 - eps, 1 + eps) A_t)
//                     + beta * (exp(ref_t - logp_t) - (ref_t - logp_t) - 1) ]
//
// (the KL term is Schulman's k3 estimator against the frozen reference).
// Its gradient with respect to logp_t is -(1/N) w_t with
//
//   w_t = A_t ratio_t [the unclipped term is the smaller: not clipped]
//         + beta * (exp(ref_t - logp_t) - 1)
//
// and since the cross-entropy is -logp, the trainer's backward of
// (1/N) sum_t w_t * CE_t with w_t held constant gives exactly L's gradient.

#include <cstdint>
#include <vector>

namespace zaya {

std::vector<float> group_advantages(const std::vector<double>& rewards, int64_t group_size, bool std_normalize);

// What the loss's pass over some rows adds up (summed over micro-batches, then divided by tokens).
struct PolicyStats {
  double tokens = 0;         // completion tokens
  double loss_sum = 0;       // sum of the per-token loss above
  double clipped = 0;        // tokens whose gradient the clip removed
  double kl_sum = 0;         // sum of the k3 estimates to the reference (0 without one)
  double entropy_sum = 0;    // sum of the policy's entropies (filled by the caller)
  double ratio_min = 1e300;  // ratio range
  double ratio_max = -1e300;
  double max_abs_shift = 0;  // max |logp_t - logp_old_t|
  void add(const PolicyStats& o);
};

// For `rows` rows of one micro-batch: w_T[t] as above for rows with a target
// (>= 0), 0 elsewhere; logp_T is the trainer's (the negated token loss),
// ref_T may be null (beta ignored then). Adds to `stats`.
void policy_token_weights(const float* logp_T, const float* logp_old_T, const float* ref_T, const float* adv_T,
                          const int32_t* targets_T, int64_t rows, double clip, double beta, float* w_T,
                          PolicyStats& stats);

// Entropy (nats) of the softmax of one row of logits over `vocab` ids.
double row_entropy(const float* logits, int64_t vocab);

}  // namespace zaya
