#pragma once
// The step guard (docs/fault-tolerance.md, "Numerical faults"): decides which
// steps are skipped and when the run rolls back, from the step's global loss
// and gradient norm alone, so it is testable without a model.
//
//   skip     a non-finite loss or gradient norm ("nan"), a step listed in
//            ft.skip_steps ("scheduled"), or a spike: a loss or gradient norm
//            more than ft.spike_z standard deviations above the window of
//            recent accepted steps (llm.c's outlier detector), once the
//            window holds ft.spike_warmup steps
//   roll back  after ft.rollback_after consecutive skipped steps, to the
//            newest checkpoint, at most ft.max_rollbacks times to the same one
//
// The window starts over in each recipe phase (a new sequence length, RoPE
// base or mixture moves the loss and the gradient norm by design). Its state
// (window, consecutive skips) travels in checkpoints; the rollback counts per
// checkpoint live only as long as the process.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zaya/train/train_config.h"

namespace zaya {

class StepGuard {
 public:
  // The most recent accepted steps the spike detector looks at.
  static constexpr int kWindow = 128;

  explicit StepGuard(const FaultToleranceConfig& ft);

  // Why step `step` (1-based: the step being judged) must not be applied, or null.
  const char* judge(int64_t step, double loss, double grad_norm) const;
  // Records the verdict of the step; true when the run must now roll back.
  bool record(const char* skipped, double loss, double grad_norm);

  // A new recipe phase: the window starts over.
  void start_over() { window_count_ = 0; }
  // Whether a rollback to `checkpoint` (empty: there is none) may happen;
  // otherwise the reason the run must stop instead. Counts the rollback.
  std::optional<std::string> rollback_refused(const std::string& checkpoint, int64_t step);
  // After a rollback: no consecutive skips any more.
  void rolled_back() { consecutive_skips_ = 0; }

  int consecutive_skips() const { return consecutive_skips_; }
  // Accepted steps in the window.
  int64_t window_steps() const { return std::min<int64_t>(window_count_, kWindow); }

  // Checkpoint state: loss_window, grad_norm_window (oldest first), window_count, consecutive_skips.
  void save_state(nlohmann::json& state) const;
  void load_state(const nlohmann::json& state);

 private:
  FaultToleranceConfig ft_;
  std::vector<double> loss_window_, gnorm_window_;  // rings of kWindow
  int64_t window_count_ = 0;
  int consecutive_skips_ = 0;
  std::map<std::string, int> rollbacks_;  // rollbacks per checkpoint
};

}  // namespace zaya
