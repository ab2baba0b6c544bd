#pragma once
// Process exit codes that carry meaning between the training job and its
// supervisor (`zaya launch`, docs/fault-tolerance.md), and the exception that
// ends a preempted run. Here, in core, because the trainer (train/), the
// supervisor (launch/) and the program (cli/) all need them.

#include <exception>

namespace zaya {

// 1: failure; 2: usage error (CLI).
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// A run that stopped for a preemption (SIGTERM/SIGINT, or the supervisor's
// stop request) after saving a checkpoint: "try again later" (EX_TEMPFAIL).
inline constexpr int kExitPreempted = 75;
// `zaya serve` stopped on SIGTERM/SIGINT and its shutdown grace ended with
// requests still running: they were answered with errors (docs/serve.md).
// A drain in which every request finished exits 0.
inline constexpr int kExitRequestsCut = 3;

// Thrown on every rank after the preemption checkpoint is saved; the program exits with kExitPreempted.
class Preempted : public std::exception {
 public:
  const char* what() const noexcept override { return "preempted: checkpoint saved, exiting for a restart"; }
};

}  // namespace zaya
