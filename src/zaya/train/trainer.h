#pragma once
// The single-process training job (`zaya train`): model, optimizer, balancing
// controller, data, the step loop with gradient accumulation, validation,
// metrics (JSONL), a loss plot and the final Hugging Face-style weights.

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zaya/ckpt/reader.h"
#include "zaya/ckpt/writer.h"
#include "zaya/core/arena.h"
#include "zaya/core/exit_codes.h"
#include "zaya/dist/mesh.h"
#include "zaya/dist/zero.h"
#include "zaya/model/model.h"
#include "zaya/optim/balance.h"
#include "zaya/optim/optimizer.h"
#include "zaya/train/batch_source.h"
#include "zaya/train/heartbeat.h"
#include "zaya/train/recipe_data.h"
#include "zaya/train/train_config.h"

namespace zaya {


struct StepResult {
  int64_t step = 0;               // steps done, after this one (skipped steps count)
  const char* skipped = nullptr;  // why this step's update was skipped (nan, loss-spike, ...), or null
  double loss = 0;                // mean cross-entropy over the step's tokens
  double router_loss = 0;         // aux + z losses (0 if disabled)
  double grad_norm = 0;           // before clipping
  double lr = 0;
  double seconds = 0;
  double compute_seconds = 0;  // this rank's forward + backward, without waiting for other ranks (stragglers)
  double flops = 0;            // model FLOPs of the step (forward + backward), this rank
  int64_t tokens = 0;          // tokens of the step, all ranks
  int64_t rank_tokens = 0;     // tokens this rank processed
  // Communication (distributed runs): gradient reduction time not hidden behind
  // the backward pass, its part that was hidden, parameter all-gather, and the
  // expert-parallel all-to-all exchanges (always on the critical path).
  double grad_reduce_exposed = 0, grad_reduce_overlapped = 0, param_gather = 0, expert_exchange = 0;
};

struct TrainSummary {
  int64_t steps = 0;
  double first_loss = 0, final_loss = 0;
  double final_val_loss = 0;
  double unigram_entropy = 0;  // of the training shard, nats/token (0 for synthetic data)
  double tokens_per_second = 0;
  double mfu = 0;  // model FLOPs / time / measured f32 GEMM peak
  double peak_gflops = 0;
  double seconds = 0;
  std::string weights_dir;
};

struct TrainerOptions {
  bool synthetic_data = false;  // random tokens instead of data.dir (benchmarks)
  bool quiet = false;           // no progress lines
  bool write_outputs = true;    // metrics, plot, final weights under run.out_dir (rank 0 writes)
  double peak_gflops = 0;       // 0: measure
  int64_t stop_at = 0;          // stop after this step (and checkpoint it) instead of train.steps (0: no)
  std::string heartbeat_dir;    // write heartbeats there for a supervisor (empty: none)
};

class Trainer {
 public:
  // mesh: the process layout of an MPI run (null: one process). Every rank
  // constructs the trainer; only rank 0 prints and writes outputs.
  Trainer(const TrainConfig& config, const TrainerOptions& options = {}, std::shared_ptr<ProcessMesh> mesh = nullptr);
  ~Trainer();

  // Runs config.run.steps optimizer steps from the current state.
  TrainSummary run();

  // One optimizer step (grad_accum micro-batches): compute_gradients + apply_update.
  StepResult train_step();
  // The forward and backward passes of one step into the gradient arena
  // (fills loss, router_loss, tokens of the result).
  StepResult compute_gradients();
  // Clipping, the optimizer update and the balancing controller (fills the rest).
  void apply_update(StepResult& r);
  const float* gradients() const { return grad_arena_.data(); }
  // Mean cross-entropy over run.eval_batches validation micro-batches (the same windows every time).
  double validation_loss();

  ZayaModel& model() { return *model_; }
  const TrainConfig& config() const { return config_; }
  // Steps done (attempts: a skipped step counts, its update did not happen).
  int64_t step() const { return step_; }
  double peak_gflops() const { return peak_gflops_; }
  // Bytes of this rank's activations and backward scratch (the batch-sized workspace).
  int64_t workspace_bytes() const { return workspace_->bytes(); }
  ProcessMesh& mesh() { return *mesh_; }
  bool is_root() const { return mesh_->rank() == 0; }
  // Continues from a checkpoint (collective; any layout can load any checkpoint).
  void resume_from(const CheckpointReader& checkpoint);
  // Writes a checkpoint of the current state (collective).
  void save_checkpoint(bool async);
  const std::string& run_id() const { return run_id_; }
  CheckpointWriter* checkpoint_writer() { return writer_.get(); }

  // The phase the run is in (recipe.h; 0 without [[phase]] tables) and the plan of every phase.
  size_t phase() const { return phase_; }
  // Accepted steps in the spike detector's window (it starts over in each recipe phase).
  int64_t spike_window_steps() const { return std::min<int64_t>(window_count_, kWindow); }
  const std::vector<PhasePlan>& phases() const { return plans_; }

  // Per-MoE-layer routing statistics of the last step.
  const std::vector<RoutingStats>& routing() { return workspace_->routing(); }

 private:
  void log_metrics(const StepResult& r, double elapsed, double eta_seconds);
  void write_loss_plot() const;
  void reduce_routing_over_world();
  void save_final(const std::string& dir);
  void open_outputs(bool resumed);
  void ensure_checkpoint_writer();
  std::vector<SnapshotTensor> snapshot_tensors() const;
  nlohmann::json checkpoint_state() const;
  void remember(const StepResult& r);
  const char* skip_reason(const StepResult& r) const;
  void incident(const std::string& event, const std::string& detail);
  bool stop_requested();
  void inject_faults_at_step_start();
  void rollback();
  void report_stragglers(double my_seconds, int64_t step);
  void install_stop_handlers();
  void guarded_save(const std::function<void()>& save);
  void enter_phase(size_t phase);
  void announce_phase();

  TrainConfig config_;
  TrainerOptions options_;
  std::shared_ptr<ProcessMesh> mesh_;
  bool distributed_ = false;
  bool outputs_enabled_ = true;  // the run writes outputs (all ranks help gather the final weights)
  std::unique_ptr<GradientSync> sync_;
  std::function<void(int)> layer_done_;
  std::vector<double> reduce_scratch_;
  std::unique_ptr<BatchSource> train_data_;
  std::unique_ptr<ShardBatchSource> val_data_;
  std::unique_ptr<ZayaModel> model_;
  std::unique_ptr<ModelWorkspace> workspace_;
  Arena grad_arena_;
  ModelWeights grads_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<BalanceController> balance_;
  std::vector<int32_t> ids_, targets_;
  std::vector<std::vector<double>> choice_counts_;
  double peak_gflops_ = 0;
  double unigram_entropy_ = 0;
  std::FILE* metrics_ = nullptr;
  std::vector<double> plot_steps_, plot_loss_, plot_val_steps_, plot_val_loss_;
  // Checkpoints.
  std::unique_ptr<CheckpointWriter> writer_;
  std::string run_id_;
  bool resumed_ = false;
  int64_t last_saved_step_ = -1;
  // The most recent step losses and gradient norms (a ring of kWindow): saved
  // with checkpoints for spike detection.
  static constexpr int kWindow = 128;
  std::vector<double> loss_window_, gnorm_window_;
  int64_t window_count_ = 0;
  // Fault tolerance.
  int64_t step_ = 0;
  int consecutive_skips_ = 0;
  bool rollback_pending_ = false;
  Heartbeat heartbeat_;
  double straggler_seconds_ = 0;  // this rank's step seconds since the last straggler report
  std::vector<double> straggler_times_;
  std::map<std::string, int> rollbacks_;  // rollbacks per checkpoint
  // Recipes (recipe.h): every phase's plan for this layout, the current phase,
  // the datasets of all phases, and train_data_ as a mixture (null without phases or with synthetic data).
  std::vector<PhasePlan> plans_;
  size_t phase_ = 0;
  // After a rollback into an earlier phase: the data position the bad phase
  // resumes from when the run enters it again.
  std::optional<std::pair<size_t, SamplerState>> data_after_rollback_;
  std::unique_ptr<RecipeData> recipe_data_;
  MixtureBatchSource* mixture_ = nullptr;
};

}  // namespace zaya
