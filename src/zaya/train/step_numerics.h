#pragma once
// The numerics of one optimizer step: the model and its batch-sized
// workspace, the gradient arena, ZeRO-1 gradient synchronisation, the
// optimizer and the balancing controller. No files and no printing: the
// decisions between the calls (skip a step, roll back) belong to the step
// guard and the job (train_job.h).
//
//   compute_gradients  grad_accum micro-batches forward + backward into the
//                      gradient arena; the last backward overlaps the
//                      gradient reduce-scatter (dist/zero.h)
//   reduce_totals      the global loss, router loss and gradient norm (one all-reduce)
//   update             when accepted: clipping, the optimizer, the parameter
//                      all-gather and the balancing biases; always the routing
//                      statistics of the global batch, timings and FLOPs
//
// Every rank of the mesh holds one. The state it owns in checkpoints
// (parameters, buffers, optimizer and controller moments, their step counts)
// is read and written through train_state.h.

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/dist/mesh.h"
#include "zaya/dist/zero.h"
#include "zaya/model/lora.h"
#include "zaya/model/model.h"
#include "zaya/optim/balance.h"
#include "zaya/optim/optimizer.h"
#include "zaya/train/batch_source.h"
#include "zaya/train/state_tensors.h"
#include "zaya/train/step_result.h"
#include "zaya/train/train_config.h"

namespace zaya {

class StepNumerics {
 public:
  // `config` is the job's, read at every step (a recipe phase changes its
  // batch shape and RoPE base); config.model must be final (vocabulary taken
  // from the data). The model is initialised from run.seed: every tensor's
  // values depend only on its name, so ranks agree without a broadcast.
  StepNumerics(const TrainConfig& config, ProcessMesh& mesh);
  StepNumerics(const StepNumerics&) = delete;
  StepNumerics& operator=(const StepNumerics&) = delete;

  ZayaModel& model() { return *model_; }
  const ZayaModel& model() const { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  BalanceController& balance() { return *balance_; }
  const BalanceController& balance() const { return *balance_; }
  // A LoRA run ([lora]): the adapters the optimizer trains (the base weights
  // stay frozen and are not stepped); null otherwise.
  const LoraAdapters* lora() const { return lora_.get(); }
  LoraAdapters* lora() { return lora_.get(); }
  // Their gradients of the last compute_gradients (summed over the world; laid out as lora()->data()).
  const float* lora_gradients() const { return lora_grad_arena_.data(); }
  // The base parameters' gradients (null in a LoRA run: the base is frozen and
  // gets none, model/weights.h) and their bytes (0 then). They hold the last
  // compute_gradients until an accepted update(), which zeroes them on a
  // single rank (the update reads them in the same pass).
  float* gradients() { return grad_arena_.data(); }
  const float* gradients() const { return grad_arena_.data(); }
  int64_t base_gradient_bytes() const { return int64_t(sizeof(float)) * int64_t(grad_arena_.capacity()); }
  // True when the forward and backward GEMMs run in bf16 (train.precision).
  bool bf16_gemms() const { return bf16_; }
  // True when the ZeRO-1 parameter all-gather carries bf16 (parallel.zero_gather_dtype).
  bool bf16_gather() const { return bf16_gather_; }
  // Under a bf16 gather the float32 master weights are exact only in each
  // rank's own shard: this replicates them in float32 (before the whole
  // float32 model is read, e.g. the final weights). A no-op otherwise.
  void gather_master_weights();
  // Bytes of this rank's activations and backward scratch; of the activations alone.
  int64_t workspace_bytes() const { return workspace_->bytes(); }
  int64_t activation_bytes() const { return workspace_->activation_bytes(); }
  // train.recompute, as the workspace applies it.
  Recompute recompute() const { return workspace_->recompute(); }
  // Per-MoE-layer routing statistics of the last step (global batch after update()).
  const std::vector<RoutingStats>& routing() { return workspace_->routing(); }

  // The workspace holds everything shaped by the batch, the RoPE table and
  // the cp group: drop it before the mesh's cp group changes, rebuild it for
  // the config's current batch shape and RoPE base (recipe phases).
  void drop_workspace() { workspace_.reset(); }
  void rebuild_workspace();

  // Zeroes the gradients, then forward + backward of grad_accum micro-batches
  // from `data` (this rank's slice of the global batch). Fills r.loss (this
  // rank's cross-entropy sum), r.router_loss, r.tokens, r.rank_tokens and
  // r.loss_tokens. The loss is a mean over the targets that count in the
  // global batch (all of them, or those a loss mask selects: with
  // data.loss_masked() they are counted and summed over the ranks first).
  //
  // weigh (RL, rl/grpo.h): called after each micro-batch's forward and before
  // its backward with the micro-batch's index and the workspace (token_loss()
  // holds that forward's per-token cross-entropy, logits() its logits); it
  // returns the per-token weights of that backward's cross-entropy term
  // (ModelWorkspace::set_token_weights; null: 1). Needs train.loss_chunk = 0.
  // before_forward (RL routing replay, docs/rl.md): called before each
  // micro-batch's forward with its index and the workspace (to set what that
  // forward and its backward read, ModelWorkspace::set_routing_record).
  using TokenWeigher = std::function<const float*(int64_t micro, const ModelWorkspace& ws)>;
  using MicroBatchHook = std::function<void(int64_t micro, ModelWorkspace& ws)>;
  void compute_gradients(BatchSource& data, StepResult& r, const TokenWeigher* weigh = nullptr,
                         const MicroBatchHook* before_forward = nullptr);
  // A forward alone of one micro-batch (B x S, B <= train.micro_batch) in the
  // step's workspace, the bf16 copy current, LoRA dropout off: the same
  // kernels, and for the same batch the same bits, as compute_gradients'
  // forward (with a LoRA dropout of 0). The workspace holds its results.
  LossParts forward_only(const int32_t* ids, const int32_t* targets, int64_t B, int64_t S);
  const ModelWorkspace& workspace() const { return *workspace_; }
  ModelWorkspace& workspace() { return *workspace_; }
  // Seconds of the last compute_gradients spent waiting for other ranks
  // (exposed gradient reduction, expert exchanges).
  double communication_wait_seconds() const;
  // r.loss, r.router_loss become the global means and r.grad_norm the global norm.
  void reduce_totals(StepResult& r);
  // See the file comment; lr_scale multiplies optim.lr.
  void update(StepResult& r, double lr_scale, bool accepted);

  // Mean cross-entropy over `batches` micro-batches of `val` from its start
  // (the same windows every time), over all ranks; masked as training is.
  double validation_loss(ShardBatchSource& val, int64_t batches);

  // Checkpoint state (train_state.h): where each of this rank's tensors
  // lives, and the optimizer's and controller's step counts.
  void* state_data(const StateTensor& t);
  void save_state(nlohmann::json& state) const;
  void load_state(const nlohmann::json& state);

  // For fault injection (fault_seam.h): this rank's owned gradients times
  // `factor`, or one of them NaN.
  void scale_owned_gradients(float factor);
  void poison_owned_gradient();

 private:
  void reduce_routing_over_world();
  // What the optimizer steps: the adapters in a LoRA run, else the model's parameters.
  float* trained() { return lora_ ? lora_->data() : model_->param_data(); }
  float* trained_gradients() { return lora_ ? lora_grad_arena_.data() : grad_arena_.data(); }
  const ParamTable& trained_table() const { return lora_ ? lora_->table() : model_->params(); }
  // Targets >= 0 of the drawn micro-batches over all ranks (each sequence once);
  // without a mask, every target of the global batch (no communication).
  int64_t global_loss_tokens(bool masked);
  // Mixed precision: the model's bf16 weight copy follows the parameters once per change.
  void refresh_bf16_weights();

  const TrainConfig& config_;
  ProcessMesh& mesh_;
  bool distributed_ = false;
  bool bf16_ = false;          // train.precision resolved for this CPU
  bool bf16_stale_ = false;    // parameters changed since the last bf16 copy
  bool bf16_gather_ = false;   // the ZeRO-1 all-gather fills the bf16 copy (parallel.zero_gather_dtype)
  bool grads_zeroed_ = false;  // the last update zeroed the gradients (Optimizer's UpdateExtras)
  std::unique_ptr<ZayaModel> model_;
  std::unique_ptr<LoraAdapters> lora_;
  Arena lora_grad_arena_;
  LoraViews lora_grads_;
  std::unique_ptr<ModelWorkspace> workspace_;
  Arena grad_arena_;
  ModelWeights grads_;
  std::unique_ptr<GradientSync> sync_;
  std::function<void(int)> layer_done_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<BalanceController> balance_;
  // Document masking (data.document_masking): each token's position in its
  // document for micro-batch `micro` of the step, filled by the data source;
  // null without masking.
  int32_t* doc_pos(int64_t micro = 0);
  std::vector<int32_t> ids_, targets_, doc_pos_;  // grad_accum micro-batches of B x S
  std::vector<std::vector<double>> choice_counts_;
  std::vector<double> reduce_scratch_;
};

}  // namespace zaya
