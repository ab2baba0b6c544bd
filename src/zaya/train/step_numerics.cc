#include "zaya/train/step_numerics.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/timer.h"
#include "zaya/dist/comm.h"

namespace zaya {

StepNumerics::StepNumerics(const TrainConfig& config, ProcessMesh& mesh) : config_(config), mesh_(mesh) {
  const ZayaConfig& mc = config.model;
  distributed_ = mesh.world_size() > 1;
  // Expert parallelism: this rank holds experts [ep_rank * E/ep, (ep_rank + 1) * E/ep).
  const int64_t local_experts = mc.experts / mesh.ep_size();
  bf16_ = uses_bf16_gemms(config.run);
  // LoRA with bf16 GEMMs: the frozen base is held in bf16 only (model/frozen_base.h). Its weights come from
  // model.init_from when set (train_job.cc loads them: no random initialisation first), else from the seed.
  const bool frozen_bf16 = config.lora.enabled && bf16_;
  // QLoRA ([lora] base_dtype): the routed experts held only as packed rows (model/model.h), under either storage.
  const WeightType expert_type = config.lora.enabled ? lora_base_expert_type(config.lora.base_dtype) : WeightType::kF32;
  const bool frozen = frozen_bf16 || expert_type != WeightType::kF32;
  model_ = std::make_unique<ZayaModel>(mc, ExpertRange{mesh.ep_rank() * local_experts, local_experts},
                                       frozen_bf16 ? ParamStorage::kFrozenBf16 : ParamStorage::kF32, expert_type);
  if (!frozen || config.init_from.empty()) model_->init(config.run.seed);
  if (config.lora.enabled) {
    // LoRA: the adapters are the only trained parameters. Every rank holds all
    // of them, expert adapters included (they are small): under expert
    // parallelism a rank forms the gradients of its own experts' adapters
    // only, and the world all-reduce below completes every one.
    lora_ = std::make_unique<LoraAdapters>(mc, config.lora);
    lora_->init(config.run.seed);
    model_->set_lora(lora_.get());
    lora_grad_arena_.reset(size_t(lora_->total_floats()));
    lora_grad_arena_.zero();
    lora_grads_ = lora_->bind(lora_grad_arena_.data());
  }
  if (bf16_) model_->enable_bf16_gemms();
  rebuild_workspace();
  // A LoRA run's base is frozen: null gradient views (model/weights.h), no base gradient arena.
  if (!lora_) {
    grad_arena_.reset(model_->params().total_floats());
    grad_arena_.zero();
  }
  grads_ = bind_weights(mc, model_->params(), lora_ ? nullptr : grad_arena_.data());
  if (lora_) {
    optimizer_ = std::make_unique<Optimizer>(lora_->table(), config.optim);
  } else if (distributed_) {
    sync_ =
        std::make_unique<GradientSync>(zero_layout(model_->params()), mesh, grad_arena_.data(), model_->param_data());
    layer_done_ = [this](int n) { sync_->layer_done(n); };
    optimizer_ = std::make_unique<Optimizer>(model_->params(), config.optim, &sync_->owned_entries());
    bf16_gather_ = bf16_ && config.parallel.zero_gather_dtype == ValueDtype::kBF16;
  } else {
    optimizer_ = std::make_unique<Optimizer>(model_->params(), config.optim);
  }
  reduce_scratch_.resize(size_t(4 + mc.num_blocks * (mc.router_slots() + 2)));
  balance_ = std::make_unique<BalanceController>(mc.num_blocks, mc.experts, mc.use_skip, config.balance);
  choice_counts_.assign(size_t(mc.num_blocks), std::vector<double>(size_t(mc.router_slots()), 0.0));
  bf16_stale_ = bf16_;  // the job may still load initial weights (train.init_from)
}

void StepNumerics::rebuild_workspace() {
  const RunConfig& run = config_.run;
  // The old workspace goes first (memory); the RoPE table is built from config.model.rope_theta.
  workspace_.reset();
  workspace_ = std::make_unique<ModelWorkspace>(
      config_.model, run.micro_batch, run.seq_len, true, mesh_.ep_size() > 1 ? &mesh_.ep() : nullptr,
      mesh_.cp_size() > 1 ? &mesh_.cp() : nullptr, run.recompute,
      bf16_ ? bf16_kept_inputs(lora_ ? &lora_->config() : nullptr) : Bf16KeptInputs{}, run.loss_chunk);
  if (bf16_) workspace_->reserve_bf16_gemms();
  if (lora_) workspace_->enable_lora(config_.model, lora_->config());
  // Every micro-batch of a step (compute_gradients draws them all first).
  ids_.assign(size_t(run.micro_batch * run.seq_len * run.grad_accum), 0);
  targets_.assign(size_t(run.micro_batch * run.seq_len * run.grad_accum), 0);
  doc_pos_.assign(config_.data.document_masking ? size_t(run.micro_batch * run.seq_len * run.grad_accum) : 0, 0);
}

int32_t* StepNumerics::doc_pos(int64_t micro) {
  const RunConfig& run = config_.run;
  return doc_pos_.empty() ? nullptr : doc_pos_.data() + micro * run.micro_batch * run.seq_len;
}

void StepNumerics::refresh_bf16_weights() {
  if (!bf16_stale_) return;
  ZAYA_PROFILE_SCOPE("train.bf16_weights");
  model_->refresh_bf16_weights();
  bf16_stale_ = false;
}

LossParts StepNumerics::forward_only(const int32_t* ids, const int32_t* targets, int64_t B, int64_t S) {
  refresh_bf16_weights();
  workspace_->set_lora_dropout(false);
  return model_forward(*model_, *workspace_, ids, targets, B, S, config_.router_losses);
}

void StepNumerics::compute_gradients(BatchSource& data, StepResult& r, const TokenWeigher* weigh,
                                     const MicroBatchHook* before_forward) {
  const RunConfig& run = config_.run;
  if (!grads_zeroed_) {
    ZAYA_PROFILE_SCOPE("train.zero_grads");
    if (lora_) {
      lora_grad_arena_.zero();
    } else {
      grad_arena_.zero();
    }
  }
  grads_zeroed_ = false;
  workspace_->reset_routing();
  refresh_bf16_weights();
  const int64_t B = run.micro_batch, S = run.seq_len, accum = run.grad_accum, W = mesh_.world_size();
  // The cp ranks of a group share sequences: world / cp groups read distinct ones.
  const int64_t data_ranks = mesh_.data_ranks();
  // The step's micro-batches first: the loss is a mean over the targets that
  // count in the whole global batch, whose number the first backward needs.
  for (int64_t a = 0; a < accum; ++a)
    data.next(ids_.data() + a * B * S, targets_.data() + a * B * S, B, S, mesh_.data_rank(), int(data_ranks),
              doc_pos(a));
  r.loss_tokens = global_loss_tokens(data.loss_masked());
  // Mean over those targets of the global batch (all ranks): gradients summed over ranks are then exact.
  const float xent_scale = 1.0f / float(std::max<int64_t>(r.loss_tokens, 1));
  const float router_scale = 1.0f / float(accum * W);  // router losses: mean over micro-batches of all ranks
  for (int64_t a = 0; a < accum; ++a) {
    const int32_t* ids = ids_.data() + a * B * S;
    const int32_t* targets = targets_.data() + a * B * S;
    if (lora_) {
      // A dropout mask of its own for every micro-batch of every data rank, from the step: resumable.
      const uint64_t pass =
          (uint64_t(optimizer_->step_count()) * uint64_t(accum) + uint64_t(a)) * uint64_t(data_ranks) +
          uint64_t(mesh_.data_rank());
      workspace_->set_lora_dropout(true, config_.run.seed, pass);
    }
    if (before_forward != nullptr) (*before_forward)(a, *workspace_);
    LossParts parts;
    {
      ZAYA_PROFILE_SCOPE("model.forward");
      // With train.loss_chunk the forward forms the LM head's gradient (model/model.h, HeadGradient).
      const HeadGradient head{grads_.lm_head_VD, xent_scale};
      parts = model_forward(*model_, *workspace_, ids, targets, B, S, config_.router_losses, doc_pos(a),
                            workspace_->loss_chunk() > 0 ? &head : nullptr);
    }
    r.loss += parts.xent_sum;
    r.router_loss += parts.router_loss;
    if (weigh != nullptr) workspace_->set_token_weights((*weigh)(a, *workspace_));
    ZAYA_PROFILE_SCOPE("model.backward");
    // The last micro-batch's backward overlaps the gradient reduction, layer by layer.
    const bool overlap = sync_ && a == accum - 1;
    if (overlap) sync_->begin();
    model_backward(*model_, *workspace_, grads_, xent_scale, router_scale, config_.router_losses,
                   overlap ? &layer_done_ : nullptr, lora_ ? &lora_grads_ : nullptr);
    workspace_->set_token_weights(nullptr);
  }
  if (sync_) sync_->finish();
  // LoRA: the adapters' gradients summed over every rank (they are replicated, like the dense weights; an
  // expert adapter's gradient comes from the one rank of each ep group that holds the expert).
  if (lora_ && distributed_) {
    ZAYA_PROFILE_SCOPE("train.lora_grad_reduce");
    mesh_.world().all_reduce(lora_grad_arena_.data(), lora_grad_arena_.data(), size_t(lora_->total_floats()),
                             DType::kF32, ReduceOp::kSum);
  }
  r.rank_tokens = B * S * accum / mesh_.cp_size();
  r.tokens = B * S * accum * data_ranks;
}

int64_t StepNumerics::global_loss_tokens(bool masked) {
  const RunConfig& run = config_.run;
  const int64_t all = run.micro_batch * run.seq_len * run.grad_accum * mesh_.data_ranks();
  if (!masked) return all;
  // Targets of -1 do not count. The cp ranks of a group hold the same whole
  // sequences, so the sum over the world counts each of them cp times.
  double count = double(std::count_if(targets_.begin(), targets_.end(), [](int32_t t) { return t >= 0; }));
  if (distributed_) mesh_.world().all_reduce(&count, &count, 1, DType::kF64, ReduceOp::kSum);
  return int64_t(count) / mesh_.cp_size();
}

double StepNumerics::communication_wait_seconds() const {
  return (sync_ ? sync_->exposed_seconds() : 0.0) + workspace_->exchange_seconds();
}

void StepNumerics::reduce_totals(StepResult& r) {
  // One all-reduce for the loss parts and the squared gradient norm of every shard.
  // LoRA: every rank holds the whole reduced adapter gradient, so its norm is local.
  const double squares = optimizer_->owned_sum_squares(trained_gradients());
  double sums[3] = {r.loss, r.router_loss, lora_ ? 0.0 : squares};
  if (distributed_) mesh_.world().all_reduce(sums, sums, 3, DType::kF64, ReduceOp::kSum);
  if (lora_) sums[2] = squares;
  r.loss = sums[0] / double(std::max<int64_t>(r.loss_tokens, 1));
  r.router_loss = sums[1] / double(config_.run.grad_accum * mesh_.world_size());
  r.grad_norm = std::sqrt(sums[2]);
}

void StepNumerics::update(StepResult& r, double lr_scale, bool accepted) {
  const ZayaConfig& c = model_->config();
  if (accepted) {
    const double clip = (config_.optim.grad_clip > 0 && r.grad_norm > config_.optim.grad_clip)
                            ? config_.optim.grad_clip / r.grad_norm
                            : 1.0;
    // One rank that updates every parameter (no ZeRO-1 shards, no adapters): the update's own pass
    // writes the bf16 copy and zeroes the gradients, saving the trainer a sweep over each arena.
    const bool whole = !lora_ && !sync_;
    UpdateExtras extras;
    extras.bf16_params = whole && bf16_ ? model_->bf16_weight_data() : nullptr;
    extras.zero_grads = whole;
    optimizer_->update(trained(), trained_gradients(), lr_scale, clip, extras);
    grads_zeroed_ = extras.zero_grads;
    if (bf16_gather_)
      sync_->all_gather_parameters_bf16(model_->bf16_weight_data());  // the bf16 copy is current
    else if (sync_)
      sync_->all_gather_parameters();
    // Frozen base weights (LoRA): their bf16 copy stays.
    bf16_stale_ = bf16_ && !lora_ && !bf16_gather_ && extras.bf16_params == nullptr;
  }
  if (distributed_) {
    reduce_routing_over_world();
    if (sync_) {
      r.grad_reduce_exposed = sync_->exposed_seconds();
      r.grad_reduce_overlapped = std::max(0.0, sync_->in_flight_seconds() - sync_->exposed_seconds());
      r.param_gather = accepted ? sync_->gather_seconds() : 0.0;
      r.param_gather_bytes = accepted ? sync_->gather_bytes() : 0;
    }
  }
  r.expert_exchange = workspace_->exchange_seconds();
  double routed_rows = 0;
  for (int64_t l = 0; l < c.num_blocks; ++l) {
    choice_counts_[size_t(l)] = workspace_->routing()[size_t(l)].choices_N;
    for (int64_t e = 0; e < c.experts; ++e) routed_rows += choice_counts_[size_t(l)][size_t(e)];
  }
  // Balancing biases from the whole step's routing (global batch): identical on every rank.
  // A LoRA run keeps them frozen unless lora.train_biases.
  if (accepted && (!lora_ || config_.lora.train_biases)) balance_->update(choice_counts_, model_->balancing_biases());
  // Model FLOPs done by this rank: its tokens (1 / cp of its sequences, with
  // the same share of causal attention under zig-zag), and its share of the routed rows.
  const double W = double(mesh_.world_size()), cp = double(mesh_.cp_size());
  r.flops = 3.0 *
            model_forward_flops(c, config_.run.micro_batch * config_.run.grad_accum, config_.run.seq_len,
                                routed_rows / W * cp) /
            cp;
}

void StepNumerics::gather_master_weights() {
  if (bf16_gather_) sync_->all_gather_parameters();
}

void StepNumerics::reduce_routing_over_world() {
  // Routing counts of every rank: the balancing controller and the metrics see the global batch.
  const ZayaConfig& c = model_->config();
  auto& routing = workspace_->routing();
  double* buf = reduce_scratch_.data();
  int64_t n = 0;
  for (auto& s : routing) {
    for (double v : s.choices_N) buf[n++] = v;
    buf[n++] = s.entropy_sum;
    buf[n++] = s.tokens;
  }
  mesh_.world().all_reduce(buf, buf, size_t(n), DType::kF64, ReduceOp::kSum);
  n = 0;
  for (auto& s : routing) {
    for (int64_t e = 0; e < c.router_slots(); ++e) s.choices_N[size_t(e)] = buf[n++];
    s.entropy_sum = buf[n++];
    s.tokens = buf[n++];
  }
}

double StepNumerics::validation_loss(ShardBatchSource& val, int64_t batches) {
  const RunConfig& run = config_.run;
  refresh_bf16_weights();
  workspace_->set_lora_dropout(false);
  val.reset();
  double sum = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < batches; ++i) {
    val.next(ids_.data(), targets_.data(), run.micro_batch, run.seq_len, mesh_.data_rank(), mesh_.data_ranks(),
             doc_pos());
    LossParts parts =
        model_forward(*model_, *workspace_, ids_.data(), targets_.data(), run.micro_batch, run.seq_len, {}, doc_pos());
    sum += parts.xent_sum;
    n += parts.xent_tokens;
  }
  double sums[2] = {sum, double(n)};
  if (distributed_) mesh_.world().all_reduce(sums, sums, 2, DType::kF64, ReduceOp::kSum);
  return sums[0] / sums[1];
}

void* StepNumerics::state_data(const StateTensor& t) {
  Optimizer& opt = *optimizer_;
  switch (t.kind) {
    case StateTensorKind::kParameter: return model_->param_data() + model_->params().entries()[t.entry].offset;
    case StateTensorKind::kFirstMoment: return opt.first_moment().data() + opt.state_offset(t.entry);
    case StateTensorKind::kSecondMoment: return opt.second_moment().data() + opt.state_offset(t.entry);
    case StateTensorKind::kBuffer: return model_->buffer_data() + model_->buffers().entries()[t.entry].offset;
    case StateTensorKind::kBalanceFirst: return balance_->first_moment().data();
    case StateTensorKind::kBalanceSecond: return balance_->second_moment().data();
    case StateTensorKind::kLoraParameter:
      ZAYA_ASSERT(lora_ != nullptr);
      return lora_->data() + lora_->table().entries()[t.entry].offset;
  }
  fail("internal error: state tensor '{}' has no place", t.name);
}

void StepNumerics::save_state(nlohmann::json& state) const {
  state["optimizer_state"] = true;
  state["optimizer_step"] = optimizer_->step_count();
  state["balance_step"] = balance_->step();
}

void StepNumerics::load_state(const nlohmann::json& state) {
  optimizer_->set_step_count(state.at("optimizer_step").get<int64_t>());
  balance_->set_step(state.at("balance_step").get<int64_t>());
  bf16_stale_ = bf16_;  // the parameters were loaded
}

void StepNumerics::scale_owned_gradients(float factor) {
  for (size_t idx : optimizer_->owned()) {
    const ParamEntry& e = trained_table().entries()[idx];
    for (int64_t i = 0; i < e.numel; ++i) trained_gradients()[e.offset + i] *= factor;
  }
}

void StepNumerics::poison_owned_gradient() {
  trained_gradients()[trained_table().entries()[optimizer_->owned().front()].offset] = std::nanf("");
}

}  // namespace zaya
