#pragma once
// The training job (`zaya train`): a thin loop that wires components owning
// their own state (the way torchtitan's trainer does):
//
//   StepNumerics       model, workspace, gradients, ZeRO-1 sync, optimizer, balancer
//   StepGuard          which steps are skipped, when to roll back
//   PhaseController    recipe phases and their data
//   RunLog             progress lines, metrics.jsonl, incidents, loss plot
//   CheckpointManager  the writer, retention, guarded saves, the rollback target
//   train_state.h      the one checkpoint schema all of them are saved and resumed through
//   FaultSeam, StopRequest, StragglerMonitor, Heartbeat   the job's fault tolerance
//
// The loop (run()) owns the cadence: phase boundaries, heartbeats, stop
// requests and preemption checkpoints, periodic and final saves, validation,
// logging and straggler reports, rollbacks. Every rank constructs the job;
// only rank 0 prints and writes outputs.

#include <cstdint>
#include <memory>
#include <string>

#include "zaya/ckpt/reader.h"
#include "zaya/dist/mesh.h"
#include "zaya/io/heartbeat.h"
#include "zaya/train/checkpoint_manager.h"
#include "zaya/train/fault_seam.h"
#include "zaya/train/loss_ends.h"
#include "zaya/train/phase_controller.h"
#include "zaya/train/run_log.h"
#include "zaya/train/step_guard.h"
#include "zaya/train/step_numerics.h"
#include "zaya/train/stop_request.h"
#include "zaya/train/straggler_monitor.h"
#include "zaya/train/train_config.h"
#include "zaya/train/train_state.h"

namespace zaya {

struct TrainJobOptions {
  bool synthetic_data = false;  // random tokens instead of data.dir (benchmarks)
  bool quiet = false;           // no progress lines
  bool write_outputs = true;    // metrics, plot, final weights under run.out_dir (rank 0 writes)
  double peak_gflops = 0;       // 0: measure
  int64_t stop_at = 0;          // stop after this step (and checkpoint it) instead of train.steps (0: no)
  std::string heartbeat_dir;    // write heartbeats there for a supervisor (empty: none)
  bool init_weights = true;     // load model.init_from's weights (false: a resume replaces them anyway)
};

struct TrainSummary {
  int64_t steps = 0;
  LossEnds train_loss;  // means over the first and last steps this process ran
  double final_val_loss = 0;
  double unigram_entropy = 0;  // of the training shard, nats/token (0 for synthetic data)
  double tokens_per_second = 0;
  double mfu = 0;  // model FLOPs / time / measured GEMM peak of the precision in use
  double peak_gflops = 0;
  double seconds = 0;
  std::string weights_dir;
  int64_t first_step = 0;         // steps done when this process started (a resumed run: the checkpoint's)
  bool already_complete = false;  // resumed at or past the last step: nothing ran
  int64_t checkpoint_step = -1;   // the newest checkpoint on disk at the end (-1: none, or checkpoints off)
  int64_t dropped_records = 0;    // metric records that could not be written (a full disk)
};

class TrainJob {
 public:
  // mesh: the process layout of an MPI run (null: one process).
  TrainJob(const TrainConfig& config, const TrainJobOptions& options = {}, std::shared_ptr<ProcessMesh> mesh = nullptr);

  // Runs to config.run.steps (or options.stop_at) from the current state.
  // Throws Preempted on every rank after a stop request's checkpoint.
  TrainSummary run();
  // One optimizer step (grad_accum micro-batches): gradients, the guard's
  // verdict, the update. A verdict that calls for a rollback is carried out by run().
  StepResult train_step();
  // Continues from a checkpoint (collective; any layout can load any checkpoint).
  void resume_from(const CheckpointReader& checkpoint);
  // Writes a checkpoint of the current state (collective).
  void save_checkpoint(bool async);
  // Mean cross-entropy over run.eval_batches validation micro-batches.
  double validation_loss();

  const TrainConfig& config() const { return config_; }
  ProcessMesh& mesh() { return *mesh_; }
  bool is_root() const { return mesh_->rank() == 0; }
  // Steps done (attempts: a skipped step counts, its update did not happen).
  int64_t step() const { return step_; }
  double peak_gflops() const { return peak_gflops_; }
  StepNumerics& numerics() { return *numerics_; }
  const StepGuard& guard() const { return guard_; }
  const PhaseController& phases() const { return *phases_; }
  CheckpointManager& checkpoints() { return checkpoints_; }
  // The components a checkpoint holds (train_state.h).
  TrainStateParts state_parts() { return {config_, *numerics_, guard_, *phases_}; }

 private:
  TrainSummary run_steps();
  void enter_phase(size_t phase);
  void rollback();
  void save_at_stop_request();

  TrainConfig config_;
  TrainJobOptions options_;
  std::shared_ptr<ProcessMesh> mesh_;
  FaultSeam faults_;
  std::unique_ptr<PhaseController> phases_;
  std::unique_ptr<StepNumerics> numerics_;
  StepGuard guard_;
  RunLog log_;
  CheckpointManager checkpoints_;
  StopRequest stop_;
  StragglerMonitor stragglers_;
  Heartbeat heartbeat_;
  double peak_gflops_ = 0;
  int64_t step_ = 0;
  bool resumed_ = false;
  bool rollback_pending_ = false;
};

}  // namespace zaya
