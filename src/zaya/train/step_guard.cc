#include "zaya/train/step_guard.h"

#include <fmt/format.h>

#include <cmath>

namespace zaya {

StepGuard::StepGuard(const FaultToleranceConfig& ft)
    : ft_(ft), loss_window_(kWindow, 0.0), gnorm_window_(kWindow, 0.0) {}

const char* StepGuard::judge(int64_t step, double loss, double grad_norm) const {
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) return "nan";
  for (int64_t s : ft_.skip_steps)
    if (s == step) return "scheduled";
  // Spikes: z-score against the window of recent accepted steps.
  const int64_t n = window_steps();
  if (ft_.spike_z <= 0 || n < ft_.spike_warmup) return nullptr;
  auto z = [&](const std::vector<double>& w, double x) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) mean += w[size_t(i)];
    mean /= double(n);
    for (int64_t i = 0; i < n; ++i) sq += (w[size_t(i)] - mean) * (w[size_t(i)] - mean);
    const double sd = std::sqrt(sq / double(n));
    return sd > 0 ? (x - mean) / sd : 0.0;
  };
  if (z(loss_window_, loss) > ft_.spike_z) return "loss-spike";
  if (z(gnorm_window_, grad_norm) > ft_.spike_z) return "grad-norm-spike";
  return nullptr;
}

bool StepGuard::record(const char* skipped, double loss, double grad_norm) {
  if (skipped == nullptr) {
    loss_window_[size_t(window_count_ % kWindow)] = loss;
    gnorm_window_[size_t(window_count_ % kWindow)] = grad_norm;
    ++window_count_;
    consecutive_skips_ = 0;
    return false;
  }
  ++consecutive_skips_;
  return ft_.rollback_after > 0 && consecutive_skips_ >= ft_.rollback_after;
}

std::optional<std::string> StepGuard::rollback_refused(const std::string& checkpoint, int64_t step) {
  if (checkpoint.empty())
    return fmt::format(
        "{} consecutive steps were skipped (up to step {}) and there is no checkpoint to roll back to; lower the "
        "learning rate or check the data",
        ft_.rollback_after, step);
  if (++rollbacks_[checkpoint] > ft_.max_rollbacks)
    return fmt::format("rolled back to {} {} times and the trouble persists (up to step {}); stopping", checkpoint,
                       ft_.max_rollbacks, step);
  return std::nullopt;
}

void StepGuard::save_state(nlohmann::json& state) const {
  // The windows oldest first.
  std::vector<double> losses, gnorms;
  const int64_t n = window_steps();
  for (int64_t i = window_count_ - n; i < window_count_; ++i) {
    losses.push_back(loss_window_[size_t(i % kWindow)]);
    gnorms.push_back(gnorm_window_[size_t(i % kWindow)]);
  }
  state["consecutive_skips"] = consecutive_skips_;
  state["loss_window"] = losses;
  state["grad_norm_window"] = gnorms;
  state["window_count"] = window_count_;
}

void StepGuard::load_state(const nlohmann::json& st) {
  consecutive_skips_ = st.value("consecutive_skips", 0);
  const std::vector<double> losses = st.value("loss_window", std::vector<double>{});
  const std::vector<double> gnorms = st.value("grad_norm_window", std::vector<double>{});
  window_count_ = st.value("window_count", int64_t(losses.size()));
  for (size_t i = 0; i < losses.size() && i < gnorms.size(); ++i) {
    const int64_t pos = window_count_ - int64_t(losses.size()) + int64_t(i);
    loss_window_[size_t(pos % kWindow)] = losses[i];
    gnorm_window_[size_t(pos % kWindow)] = gnorms[i];
  }
}

}  // namespace zaya
