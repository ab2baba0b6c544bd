#include "zaya/train/fault_seam.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>

#include "zaya/core/error.h"
#include "zaya/core/fault.h"

namespace zaya {

void FaultSeam::at_startup() const {
  ZAYA_CHECK(!fault_planned("startup", rank_), "injected start-up fault on rank {}", rank_);
}

void FaultSeam::at_step_start(int64_t step) const {
  if (fault_planned("kill", rank_, step)) std::raise(SIGKILL);
  if (fault_planned("hang", rank_, step))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // no heartbeat, no progress
  if (fault_planned("preempt", rank_, step)) std::raise(SIGTERM);
}

void FaultSeam::before_compute(int64_t step) const {
  if (auto f = planned_fault("slow", rank_, step))  // this rank computes slowly
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f->ms));
  ZAYA_CHECK(!fault_planned("step", rank_, step), "injected fault at step {} on rank {}", step, rank_);
}

void FaultSeam::after_gradients(int64_t step, StepNumerics& numerics, StepResult& r) const {
  if (fault_planned("spike", rank_, step)) {  // a loss spike on this rank
    r.loss *= 1000.0;
    numerics.scale_owned_gradients(1000.0f);
  }
  if (fault_planned("nan", rank_, step)) {  // a NaN in this rank's loss and gradients
    r.loss = std::nan("");
    numerics.poison_owned_gradient();
  }
}

}  // namespace zaya
