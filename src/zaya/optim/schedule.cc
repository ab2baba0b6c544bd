#include "zaya/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"

namespace zaya {

void ScheduleConfig::validate(const std::string& source) const {
  ZAYA_CHECK(total_steps >= 1, "{}: train.steps = {} is invalid; allowed: >= 1", source, total_steps);
  ZAYA_CHECK(warmup_steps >= 0 && warmup_steps <= total_steps,
             "{}: schedule.warmup_steps = {} is invalid; allowed: 0..train.steps ({})", source, warmup_steps,
             total_steps);
  ZAYA_CHECK(min_lr_ratio >= 0 && min_lr_ratio <= 1, "{}: schedule.min_lr_ratio = {} is invalid; allowed: 0..1", source,
             min_lr_ratio);
  ZAYA_CHECK(decay_fraction > 0 && decay_fraction <= 1, "{}: schedule.decay_fraction = {} is invalid; allowed: (0, 1]",
             source, decay_fraction);
}

double lr_multiplier(const ScheduleConfig& s, int64_t step) {
  if (step < s.warmup_steps) return double(step + 1) / double(s.warmup_steps);
  if (s.kind == ScheduleKind::kConstant) return 1.0;
  const double floor = s.min_lr_ratio;
  if (s.kind == ScheduleKind::kCosine) {
    const double span = double(std::max<int64_t>(1, s.total_steps - s.warmup_steps));
    const double progress = std::min(1.0, double(step - s.warmup_steps) / span);
    return floor + (1.0 - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  // wsd: stable at 1, then linear decay to the floor over the last decay_fraction of the run.
  const int64_t decay_steps = std::max<int64_t>(1, int64_t(std::llround(s.decay_fraction * double(s.total_steps))));
  const int64_t decay_start = s.total_steps - decay_steps;
  if (step < decay_start) return 1.0;
  const double progress = std::min(1.0, double(step - decay_start + 1) / double(decay_steps));
  return 1.0 - (1.0 - floor) * progress;
}

}  // namespace zaya
