#pragma once
// Injected faults (core/fault.h, docs/fault-tolerance.md) enter the training
// job here and nowhere else, at four points of a step:
//
//   at_startup        startup   the job's start-up fails on the rank
//   at_step_start     kill      SIGKILL;  hang: no progress, no heartbeat;  preempt: SIGTERM
//   before_compute    slow      the rank sleeps (a straggler);  step: the step throws
//   after_gradients   spike     the rank's loss and gradients x1000;  nan: its loss and one gradient NaN
//
// Checkpoint faults (ckpt-write, corrupt-ckpt) are injected where the files
// are written, in ckpt/writer.cc.

#include <cstdint>

#include "zaya/train/step_numerics.h"
#include "zaya/train/step_result.h"

namespace zaya {

class FaultSeam {
 public:
  explicit FaultSeam(int rank) : rank_(rank) {}
  void at_startup() const;
  // `step`: the step about to run (1-based).
  void at_step_start(int64_t step) const;
  void before_compute(int64_t step) const;
  void after_gradients(int64_t step, StepNumerics& numerics, StepResult& r) const;

 private:
  int rank_;
};

}  // namespace zaya
