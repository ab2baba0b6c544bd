#pragma once
// Fault injection (issue [ft]): make a chosen rank fail in a chosen way at a
// chosen step, so tests can check that the run detects and survives it.
//
//   zaya train ... --inject kill:rank=1,step=37        (or ZAYA_FAULT=... in the environment)
//
// Several faults are separated by ';'. Fields: rank, step (a field left out
// matches any), ms (for slow). Each fault fires once per process, except slow,
// which fires at every matching step. Kinds:
//   kill          the rank kills itself with SIGKILL at the start of the step
//   hang          the rank stops making progress (sleeps forever) at the step
//   nan           one of the rank's gradients becomes NaN in the step
//   spike         the rank's loss and gradients are blown up 1000x in the step (a loss spike)
//   slow          the rank sleeps `ms` milliseconds in every matching step (a straggler)
//   preempt       the rank receives SIGTERM at the step (a preemption)
//   step          the step throws an error on the rank
//   startup       the trainer's start-up fails on the rank
//   ckpt-write    the rank's background checkpoint write fails (like a full disk)
//   corrupt-ckpt  after the checkpoint of that step is published, rank 0 damages it

#include <cstdint>
#include <optional>
#include <string>

namespace zaya {

struct FaultSpec {
  std::string kind;
  int rank = -1;      // -1: any
  int64_t step = -1;  // -1: any
  double ms = 0;
  bool fired = false;
};

// Sets the plan (replacing ZAYA_FAULT); throws zaya::Error on a malformed spec
// naming the allowed kinds and fields.
void set_fault_plan(const std::string& spec);

// The planned fault of `kind` for this rank and step, if any (marking it fired).
std::optional<FaultSpec> planned_fault(const std::string& kind, int rank, int64_t step = -1);
inline bool fault_planned(const std::string& kind, int rank, int64_t step = -1) {
  return planned_fault(kind, rank, step).has_value();
}

}  // namespace zaya
