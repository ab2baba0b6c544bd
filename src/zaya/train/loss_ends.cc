#include "zaya/train/loss_ends.h"

#include <fmt/format.h>

#include <algorithm>

namespace zaya {

LossEnds loss_ends(const std::vector<double>& losses, int64_t first_step) {
  LossEnds e;
  const int64_t n = int64_t(losses.size());
  if (n == 0) return e;
  e.window = std::clamp<int64_t>(n / 5, 1, 10);
  e.first_step = first_step;
  e.last_step = first_step + n - 1;
  for (int64_t i = 0; i < e.window; ++i) {
    e.first += losses[size_t(i)];
    e.last += losses[size_t(n - 1 - i)];
  }
  e.first /= double(e.window);
  e.last /= double(e.window);
  return e;
}

std::string LossEnds::describe() const {
  if (window == 1) return fmt::format("{:.4f} (step {}) -> {:.4f} (step {})", first, first_step, last, last_step);
  return fmt::format("{:.4f} (mean of steps {}-{}) -> {:.4f} (steps {}-{})", first, first_step, first_step + window - 1,
                     last, last_step - window + 1, last_step);
}

}  // namespace zaya
