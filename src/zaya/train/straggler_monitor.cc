#include "zaya/train/straggler_monitor.h"

#include <fmt/format.h>

#include <algorithm>

#include "zaya/dist/comm.h"

namespace zaya {

void StragglerMonitor::report(int64_t step, RunLog& log) {
  const int W = mesh_.world_size();
  if (W > 1) {
    times_.resize(size_t(W));
    mesh_.world().all_gather(&seconds_, times_.data(), 1, DType::kF64);
    const auto [lo, hi] = std::minmax_element(times_.begin(), times_.end());
    const int slowest = int(hi - times_.begin());
    log.stragglers(step, times_, slowest);
    if (*lo > 0 && *hi > ratio_ * *lo)
      log.incident("straggler",
                   fmt::format("rank {} took {:.3f} s over the last steps, the fastest rank {:.3f} s ({:.1f}x)",
                               slowest, *hi, *lo, *hi / *lo),
                   step);
  }
  seconds_ = 0;
}

}  // namespace zaya
