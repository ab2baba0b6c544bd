#pragma once
// What one optimizer step did: filled by the step numerics (losses, norm,
// timings, FLOPs) and the step guard (the skip decision), read by the run log,
// the job loop and `zaya bench train`.

#include <cstdint>

namespace zaya {

struct StepResult {
  int64_t step = 0;               // steps done, after this one (skipped steps count)
  const char* skipped = nullptr;  // why this step's update was skipped (nan, loss-spike, ...), or null
  double loss = 0;         // mean cross-entropy over the step's loss_tokens (before reduce_totals: this rank's sum)
  double router_loss = 0;  // aux + z losses (0 if disabled)
  double grad_norm = 0;    // before clipping
  double lr = 0;
  double seconds = 0;
  double compute_seconds = 0;  // this rank's forward + backward, without waiting for other ranks (stragglers)
  double flops = 0;            // model FLOPs of the step (forward + backward), this rank
  int64_t tokens = 0;          // tokens of the step, all ranks
  int64_t rank_tokens = 0;     // tokens this rank processed
  int64_t loss_tokens = 0;     // targets the loss is a mean over, all ranks (= tokens unless a loss mask drops some)
  // Communication (distributed runs): gradient reduction time not hidden behind
  // the backward pass, its part that was hidden, parameter all-gather, and the
  // expert-parallel all-to-all exchanges (always on the critical path).
  double grad_reduce_exposed = 0, grad_reduce_overlapped = 0, param_gather = 0, expert_exchange = 0;
  int64_t param_gather_bytes = 0;  // bytes this rank received in the ZeRO-1 parameter all-gather (0: none)
};

}  // namespace zaya
