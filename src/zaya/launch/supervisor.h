#pragma once
// The supervisor behind `zaya launch`: starts a training job (one process, or
// N ranks under mpirun), watches it, and restarts it from the newest valid
// checkpoint when it fails, within a restart budget and with exponential
// backoff. Every event goes to a JSONL incident log (OUT_DIR/incidents.jsonl).
//
// What it detects:
//   a rank that dies          the job's exit status (a signal, MPI_Abort, an error exit)
//   a rank that hangs         its heartbeat file stops changing for longer than the
//                             phase's timeout (set-up, step, checkpoint, evaluation);
//                             the step timeout is learned from observed step times
//   a preemption              exit code 75 after the job saved a checkpoint: resume
// SIGTERM/SIGINT to the supervisor asks the job to stop at the next step
// boundary with a checkpoint (OUT_DIR/control/stop), then exits with 75.

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct SupervisorOptions {
  int ranks = 1;  // 1: run the trainer directly; >1: under mpirun
  std::string mpirun = "mpirun";
  std::vector<std::string> mpirun_args;  // extra launcher arguments (hostfile, mapping, MCA, -x)
  std::vector<std::string> train_args;   // `train --config ...` for the zaya binary
  std::string zaya_binary;               // the program to run (this executable)
  std::string out_dir;                   // the run's train.out_dir
  std::string checkpoint_dir;            // where the run's checkpoints are
  int max_restarts = 5;                  // failures (crash, hang) tolerated before giving up
  int max_preemptions = 100;
  double backoff_seconds = 1.0;  // first restart delay, doubled each failure
  double backoff_max_seconds = 60.0;
  double setup_timeout = 600.0;       // start-up and loading, per attempt
  double min_step_timeout = 60.0;     // a step may take this long at least...
  double step_timeout_factor = 10.0;  // ...or this many times the slowest step seen
  double checkpoint_timeout = 900.0;
  double eval_timeout = 900.0;
  std::string inject;  // fault injection for the first attempt only (tests)
};

// Runs the job to completion. Returns the exit code for `zaya launch`:
// 0 finished, 75 stopped by a signal to the supervisor, 1 gave up.
int supervise(const SupervisorOptions& options);

}  // namespace zaya
