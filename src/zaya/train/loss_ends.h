#pragma once
// The train loss at the start and the end of a run for its closing line, each
// a mean over a few steps: one step's loss is one batch's, and two single
// batches can make a LoRA run's loss seem to rise while validation stayed
// flat (red-team L17: 2.6287 -> 3.1208 over 30 steps).

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct LossEnds {
  double first = 0, last = 0;  // the means
  int64_t window = 0;          // steps in each mean (0: no steps)
  int64_t first_step = 0;      // the first mean covers steps first_step .. first_step + window - 1
  int64_t last_step = 0;       // the last mean ends at this step
  // "2.9312 (mean of steps 1-6) -> 2.9874 (steps 25-30)"; one step: "(step 1) -> (step 30)".
  std::string describe() const;
};

// losses[i] is the loss of step first_step + i; each mean covers n / 5 steps,
// at least 1 and at most 10.
LossEnds loss_ends(const std::vector<double>& losses, int64_t first_step);

}  // namespace zaya
