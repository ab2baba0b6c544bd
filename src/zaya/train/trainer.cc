#include "zaya/train/trainer.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "zaya/core/error.h"
#include "zaya/core/fault.h"
#include "zaya/core/profiler.h"
#include "zaya/core/timer.h"
#include "zaya/data/shard_builder.h"
#include "zaya/dist/collective.h"
#include "zaya/dist/comm.h"
#include "zaya/io/append_file.h"
#include "zaya/io/atomic_file.h"
#include "zaya/model/hf_checkpoint.h"
#include "zaya/model/hf_config.h"
#include "zaya/ops/gemm_peak.h"
#include "zaya/optim/schedule.h"
#include "zaya/report/svg_line_plot.h"

namespace zaya {
namespace {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string format_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.2f}M", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.1f}k", tokens_per_s / 1e3);
  return fmt::format("{:.0f}", tokens_per_s);
}

std::string path_join(const std::string& a, const std::string& b) { return (std::filesystem::path(a) / b).string(); }

// The model's vocabulary from the token shards' (`what` names them in errors):
// the real size from the data, embedding rows padded to a multiple of 128
// (spec §7, Megatron), unless the config set the sizes explicitly.
void adopt_data_vocab(const TrainConfig& config, ZayaConfig& mc, int64_t data_vocab, const std::string& what) {
  if (config.vocab_from_tokenizer) {
    mc.real_vocab_size = data_vocab;
    mc.vocab_size = (data_vocab + 127) / 128 * 128;
  } else {
    ZAYA_CHECK(data_vocab <= mc.real_vocab_size, "{}: {} use a vocabulary of {} ids but model.real_vocab_size is {}",
               config.source, what, data_vocab, mc.real_vocab_size);
  }
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, const TrainerOptions& options, std::shared_ptr<ProcessMesh> mesh)
    : config_(config), options_(options), mesh_(std::move(mesh)) {
  if (config_.run.threads > 0) omp_set_num_threads(config_.run.threads);
  if (!mesh_) mesh_ = std::make_shared<ProcessMesh>(make_self_comm(), 1);
  ZAYA_CHECK(mesh_->ep_size() == config_.parallel.ep, "{}: parallel.ep = {} but the process mesh has ep = {}",
             config_.source, config_.parallel.ep, mesh_->ep_size());
  ZAYA_CHECK(mesh_->cp_size() == config_.parallel.cp || !config_.phases.empty(),
             "{}: parallel.cp = {} but the process mesh has cp = {}", config_.source, config_.parallel.cp,
             mesh_->cp_size());
  distributed_ = mesh_->world_size() > 1;
  if (!is_root()) options_.quiet = true;
  ZAYA_CHECK(!fault_planned("startup", mesh_->rank()), "injected start-up fault on rank {}", mesh_->rank());
  const RunConfig& run = config_.run;
  ZayaConfig& mc = config_.model;
  // Recipes (recipe.h): every phase laid out for this layout's data replicas; the run starts in the first.
  plans_ = plan_phases(config_, mesh_->world_size());
  if (!config_.phases.empty()) {
    config_.run.steps = plans_.back().end_step();
    config_.run.micro_batch = plans_[0].micro_batch;
    config_.run.seq_len = plans_[0].seq_len;
    mc.rope_theta = plans_[0].rope_theta;
    mesh_->set_cp(plans_[0].cp);  // a phase may run with its own cp (ep = 1)
  }
  if (options_.synthetic_data) {
    train_data_ = std::make_unique<SyntheticBatchSource>(mc.real_vocab_size, run.seed);
  } else if (!config_.phases.empty()) {
    recipe_data_ = std::make_unique<RecipeData>(config_);
    adopt_data_vocab(config_, mc, recipe_data_->vocab_size(), "the recipe's token shards");
    unigram_entropy_ = unigram_entropy(recipe_data_->main_train_shard(0));
    auto train = recipe_data_->train_source(0, run.seq_len, run.seed);
    mixture_ = train.get();
    train_data_ = std::move(train);
    val_data_ = recipe_data_->val_source(0, run.seq_len);
  } else {
    auto train = std::make_unique<ShardBatchSource>(path_join(config_.data.dir, "train"), run.seq_len, run.seed,
                                                    SamplerOrder::kShuffled);
    val_data_ = std::make_unique<ShardBatchSource>(path_join(config_.data.dir, "val"), run.seq_len, 0,
                                                   SamplerOrder::kSequential);
    adopt_data_vocab(config_, mc, train->shard().vocab_size(),
                     fmt::format("the token shards in '{}'", config_.data.dir));
    ZAYA_CHECK(val_data_->shard().vocab_size() == train->shard().vocab_size(),
               "{}: train and val shards in '{}' were built with different tokenizers ({} vs {} ids)", config_.source,
               config_.data.dir, train->shard().vocab_size(), val_data_->shard().vocab_size());
    unigram_entropy_ = unigram_entropy(train->shard());
    train_data_ = std::move(train);
  }
  mc.validate(config_.source);
  // Expert parallelism: this rank holds experts [ep_rank * E/ep, (ep_rank + 1) * E/ep).
  const int64_t local_experts = mc.experts / mesh_->ep_size();
  model_ = std::make_unique<ZayaModel>(mc, ExpertRange{mesh_->ep_rank() * local_experts, local_experts});
  model_->init(run.seed);  // every tensor's values depend only on its name: ranks agree without a broadcast
  workspace_ = std::make_unique<ModelWorkspace>(mc, run.micro_batch, run.seq_len, true,
                                                mesh_->ep_size() > 1 ? &mesh_->ep() : nullptr,
                                                mesh_->cp_size() > 1 ? &mesh_->cp() : nullptr);
  grad_arena_.reset(model_->params().total_floats());
  grad_arena_.zero();
  grads_ = bind_weights(mc, model_->params(), grad_arena_.data());
  if (distributed_) {
    mesh_->world().set_timeout(config_.parallel.comm_timeout);
    mesh_->ep().set_timeout(config_.parallel.comm_timeout);
    mesh_->dp().set_timeout(config_.parallel.comm_timeout);
    mesh_->cp().set_timeout(config_.parallel.comm_timeout);
    sync_ = std::make_unique<GradientSync>(zero_layout(model_->params()), *mesh_, grad_arena_.data(), model_->param_data());
    layer_done_ = [this](int n) { sync_->layer_done(n); };
    optimizer_ = std::make_unique<Optimizer>(model_->params(), config_.optim, &sync_->owned_entries());
  } else {
    optimizer_ = std::make_unique<Optimizer>(model_->params(), config_.optim);
  }
  reduce_scratch_.resize(4 + mc.num_blocks * (mc.router_slots() + 2));
  balance_ = std::make_unique<BalanceController>(mc.num_blocks, mc.experts, mc.use_skip, config_.balance);
  ids_.resize(run.micro_batch * run.seq_len);
  targets_.resize(run.micro_batch * run.seq_len);
  choice_counts_.assign(mc.num_blocks, std::vector<double>(mc.router_slots(), 0.0));
  peak_gflops_ = options_.peak_gflops > 0 ? options_.peak_gflops : measure_f32_gemm_gflops();
  outputs_enabled_ = options_.write_outputs;
  if (!is_root()) options_.write_outputs = false;
  loss_window_.assign(kWindow, 0.0);
  gnorm_window_.assign(kWindow, 0.0);
  if (!options_.heartbeat_dir.empty()) {
    heartbeat_ = Heartbeat(options_.heartbeat_dir, mesh_->rank());
    heartbeat_.beat("setup", step_);
  }
}

Trainer::~Trainer() {
  if (metrics_ != nullptr) std::fclose(metrics_);
}

void Trainer::open_outputs(bool resumed) {
  if (!options_.write_outputs) return;
  const RunConfig& run = config_.run;
  std::error_code ec;
  std::filesystem::create_directories(run.out_dir, ec);
  ZAYA_CHECK(!ec, "cannot create train.out_dir '{}': {}", run.out_dir, ec.message());
  const std::string metrics_path = path_join(run.out_dir, "metrics.jsonl");
  if (resumed) {
    // Keep the records up to the checkpoint (a crashed run may have logged
    // steps past it), then continue the file; reload the plot's points.
    std::vector<std::string> kept;
    std::ifstream in(metrics_path);
    std::string line;
    while (std::getline(in, line)) {
      const size_t at = line.find("\"step\":");
      if (at == std::string::npos) continue;
      const int64_t s = std::atoll(line.c_str() + at + 7);
      if (s > step()) continue;
      kept.push_back(line);
      const size_t loss = line.find("\"loss\":"), val = line.find("\"val_loss\":");
      if (loss != std::string::npos) {
        plot_steps_.push_back(double(s));
        plot_loss_.push_back(std::atof(line.c_str() + loss + 7));
      } else if (val != std::string::npos) {
        plot_val_steps_.push_back(double(s));
        plot_val_loss_.push_back(std::atof(line.c_str() + val + 11));
      }
    }
    std::string text;
    for (const std::string& k : kept) text += k + "\n";
    write_file_atomic(metrics_path, text);
  }
  metrics_ = std::fopen(metrics_path.c_str(), resumed ? "a" : "w");
  ZAYA_CHECK(metrics_ != nullptr, "cannot write '{}'", metrics_path);
  write_file_atomic(path_join(run.out_dir, "config.toml"), train_config_to_toml(config_));
}

void Trainer::remember(const StepResult& r) {
  loss_window_[window_count_ % kWindow] = r.loss;
  gnorm_window_[window_count_ % kWindow] = r.grad_norm;
  ++window_count_;
}

nlohmann::json Trainer::checkpoint_state() const {
  const SamplerState data = train_data_->state();
  // The windows oldest first.
  std::vector<double> losses, gnorms;
  const int64_t n = std::min<int64_t>(window_count_, kWindow);
  for (int64_t i = window_count_ - n; i < window_count_; ++i) {
    losses.push_back(loss_window_[i % kWindow]);
    gnorms.push_back(gnorm_window_[i % kWindow]);
  }
  nlohmann::json state = {{"step", step_},
                          {"optimizer_step", optimizer_->step_count()},
                          {"consecutive_skips", consecutive_skips_},
                          {"optimizer_state", true},
                          {"balance_step", balance_->step()},
                          {"data", {{"seed", data.seed}, {"epoch", data.epoch}, {"index", data.index}}},
                          {"loss_window", losses},
                          {"grad_norm_window", gnorms},
                          {"window_count", window_count_}};
  if (!config_.phases.empty()) {
    // The phase (counted from 1), the step it began at and, with real data, every dataset's position.
    nlohmann::json recipe = {
        {"phase", phase_ + 1}, {"name", plans_[phase_].name}, {"phase_start", plans_[phase_].first_step}};
    if (mixture_ != nullptr) recipe["mixture"] = mixture_state_to_json(mixture_->mixture_state());
    state["recipe"] = recipe;
  }
  return state;
}

std::vector<SnapshotTensor> Trainer::snapshot_tensors() const {
  std::vector<SnapshotTensor> out;
  const auto& entries = model_->params().entries();
  Optimizer& opt = *optimizer_;
  for (size_t idx : opt.owned()) {
    const ParamEntry& e = entries[idx];
    out.push_back({e.name, CkptDType::kF32, e.shape, model_->param_data() + e.offset});
    out.push_back({"optim.m." + e.name, CkptDType::kF32, e.shape, opt.first_moment().data() + opt.state_offset(idx)});
    if (!(config_.optim.use_muon && e.muon))
      out.push_back(
          {"optim.v." + e.name, CkptDType::kF32, e.shape, opt.second_moment().data() + opt.state_offset(idx)});
  }
  if (is_root()) {  // replicated state: written once
    for (const ParamEntry& e : model_->buffers().entries())
      out.push_back({e.name, CkptDType::kF32, e.shape, model_->buffer_data() + e.offset});
    const int64_t layers = model_->config().num_blocks, slots = model_->config().router_slots();
    out.push_back({"balance.m", CkptDType::kF64, {layers, slots}, balance_->first_moment().data()});
    out.push_back({"balance.v", CkptDType::kF64, {layers, slots}, balance_->second_moment().data()});
  }
  return out;
}

void Trainer::ensure_checkpoint_writer() {
  if (writer_) return;
  if (run_id_.empty()) run_id_ = new_run_id(mesh_->world());
  RetentionPolicy keep;
  keep.keep_last = config_.checkpoint.keep_last;
  keep.keep_every = config_.checkpoint.keep_every;
  writer_ = std::make_unique<CheckpointWriter>(mesh_->world(), config_.checkpoint_dir(), run_id_, mesh_->dp_size(),
                                               mesh_->ep_size(), keep, mesh_->cp_size());
}

void Trainer::save_checkpoint(bool async) {
  ensure_checkpoint_writer();
  CheckpointMeta header;
  header.state = checkpoint_state();
  header.config_toml = train_config_to_toml(config_);
  writer_->save(step(), snapshot_tensors(), header, async);
  last_saved_step_ = step();
}

void Trainer::resume_from(const CheckpointReader& ck) {
  const CheckpointMeta& meta = ck.meta();
  // The model must be the same; everything else may change (layout, optimizer settings, out_dir...).
  const TrainConfig saved = parse_train_config(meta.config_toml, ck.dir() + "/metadata.json (config)");
  // The RoPE base and the longest position shape no parameter: a context
  // extension changes them (a recipe phase sets its own RoPE base below).
  ZayaConfig saved_model = saved.model;
  if (is_root() && !options_.quiet &&
      (saved_model.rope_theta != model_->config().rope_theta ||
       saved_model.max_position != model_->config().max_position) &&
      config_.phases.empty())
    fmt::print(
        "note: {} was trained with rope_theta {:g} and max_position_embeddings {}; continuing with {:g} and "
        "{}\n",
        ck.dir(), saved_model.rope_theta, saved_model.max_position, model_->config().rope_theta,
        model_->config().max_position);
  saved_model.rope_theta = model_->config().rope_theta;
  saved_model.max_position = model_->config().max_position;
  ZAYA_CHECK(config_to_hf_json(saved_model, "float32") == config_to_hf_json(model_->config(), "float32"),
             "{}: the checkpoint's model ({} preset, hidden {}, {} blocks, {} experts, vocab {}) differs from this "
             "config's; resume with the model it was trained with",
             ck.dir(), saved.model_preset, saved.model.hidden, saved.model.num_blocks, saved.model.experts,
             saved.model.vocab_size);
  for (const ParamEntry& e : model_->params().entries())
    ck.read(e.name, model_->param_data() + e.offset, CkptDType::kF32, e.shape);
  for (const ParamEntry& e : model_->buffers().entries())
    ck.read(e.name, model_->buffer_data() + e.offset, CkptDType::kF32, e.shape);
  const nlohmann::json& st = meta.state;
  const bool has_optimizer = st.value("optimizer_state", false);
  if (!config_.phases.empty()) {
    // The checkpoint's phase (or, from a checkpoint without one, the phase of its step).
    size_t phase = phase_at_step(plans_, st.value("step", meta.step));
    if (st.contains("recipe")) {
      const nlohmann::json& rc = st.at("recipe");
      const int64_t number = rc.at("phase").get<int64_t>(), start = rc.at("phase_start").get<int64_t>();
      ZAYA_CHECK(number >= 1 && size_t(number) <= plans_.size() && plans_[size_t(number) - 1].first_step == start,
                 "{}: the checkpoint is in phase {} of its recipe, which began at step {}, but this run has {} "
                 "phases{}: the phases' steps depend on their tokens and the global batch (micro_batch x seq_len x "
                 "grad_accum x data replicas); resume with the checkpoint's recipe and global batch",
                 ck.dir(), number, start, plans_.size(),
                 number >= 1 && size_t(number) <= plans_.size()
                     ? fmt::format(" and its phase {} begins at step {}", number, plans_[size_t(number) - 1].first_step)
                     : std::string());
      phase = size_t(number) - 1;
    }
    enter_phase(phase);
  }
  Optimizer& opt = *optimizer_;
  opt.first_moment().zero();
  opt.second_moment().zero();
  if (has_optimizer) {
    for (size_t idx : opt.owned()) {
      const ParamEntry& e = model_->params().entries()[idx];
      ck.read("optim.m." + e.name, opt.first_moment().data() + opt.state_offset(idx), CkptDType::kF32, e.shape);
      if (!(config_.optim.use_muon && e.muon))
        ck.read("optim.v." + e.name, opt.second_moment().data() + opt.state_offset(idx), CkptDType::kF32, e.shape);
    }
    const int64_t layers = model_->config().num_blocks, slots = model_->config().router_slots();
    ck.read("balance.m", balance_->first_moment().data(), CkptDType::kF64, {layers, slots});
    ck.read("balance.v", balance_->second_moment().data(), CkptDType::kF64, {layers, slots});
    opt.set_step_count(st.at("optimizer_step").get<int64_t>());
    consecutive_skips_ = st.value("consecutive_skips", 0);
    balance_->set_step(st.at("balance_step").get<int64_t>());
    const nlohmann::json& d = st.at("data");
    if (mixture_ != nullptr && st.contains("recipe") && st["recipe"].contains("mixture"))
      mixture_->set_mixture_state(mixture_state_from_json(st["recipe"]["mixture"]));
    else if (config_.phases.empty() == !st.contains("recipe"))  // (a recipe's phase starts its data afresh)
      train_data_->set_state(
          {d.at("seed").get<uint64_t>(), d.at("epoch").get<uint64_t>(), d.at("index").get<uint64_t>()});
    const std::vector<double> losses = st.value("loss_window", std::vector<double>{});
    const std::vector<double> gnorms = st.value("grad_norm_window", std::vector<double>{});
    window_count_ = st.value("window_count", int64_t(losses.size()));
    for (size_t i = 0; i < losses.size() && i < gnorms.size(); ++i) {
      const int64_t pos = window_count_ - int64_t(losses.size()) + int64_t(i);
      loss_window_[pos % kWindow] = losses[i];
      gnorm_window_[pos % kWindow] = gnorms[i];
    }
  }
  run_id_ = meta.run_id;
  step_ = st.value("step", meta.step);
  resumed_ = true;
  last_saved_step_ = step();
}

StepResult Trainer::train_step() {
  const double t0 = now_seconds();
  StepResult r = compute_gradients();
  apply_update(r);
  r.seconds = now_seconds() - t0;
  return r;
}

StepResult Trainer::compute_gradients() {
  const RunConfig& run = config_.run;
  const double t0 = now_seconds();
  if (auto f = planned_fault("slow", mesh_->rank(), step_ + 1))  // injected: this rank computes slowly
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f->ms));
  ZAYA_CHECK(!fault_planned("step", mesh_->rank(), step_ + 1), "injected fault at step {} on rank {}", step_ + 1,
             mesh_->rank());
  {
    ZAYA_PROFILE_SCOPE("train.zero_grads");
    grad_arena_.zero();
  }
  workspace_->reset_routing();
  const int64_t B = run.micro_batch, S = run.seq_len, accum = run.grad_accum, W = mesh_->world_size();
  // The cp ranks of a group share sequences: world / cp groups read distinct ones.
  const int64_t data_ranks = mesh_->data_ranks();
  // Mean over every token of the global batch (all ranks): gradients summed over ranks are then exact.
  const float xent_scale = 1.0f / float(B * S * accum * data_ranks);
  const float router_scale = 1.0f / float(accum * W);  // router losses: mean over micro-batches of all ranks
  StepResult r;
  for (int64_t a = 0; a < accum; ++a) {
    train_data_->next(ids_.data(), targets_.data(), B, S, mesh_->data_rank(), int(data_ranks));
    LossParts parts;
    {
      ZAYA_PROFILE_SCOPE("model.forward");
      parts = model_forward(*model_, *workspace_, ids_.data(), targets_.data(), B, S, config_.router_losses);
    }
    r.loss += parts.xent_sum;
    r.router_loss += parts.router_loss;
    ZAYA_PROFILE_SCOPE("model.backward");
    // The last micro-batch's backward overlaps the gradient reduction, layer by layer.
    const bool overlap = distributed_ && a == accum - 1;
    if (overlap) sync_->begin();
    model_backward(*model_, *workspace_, grads_, xent_scale, router_scale, config_.router_losses,
                   overlap ? &layer_done_ : nullptr);
  }
  if (distributed_) sync_->finish();
  // Own work only: the wait for other ranks' gradients and expert rows is theirs.
  r.compute_seconds =
      now_seconds() - t0 - (distributed_ ? sync_->exposed_seconds() : 0.0) - workspace_->exchange_seconds();
  if (fault_planned("spike", mesh_->rank(), step_ + 1)) {  // injected: a loss spike on this rank
    r.loss *= 1000.0;
    for (size_t idx : optimizer_->owned()) {
      const ParamEntry& e = model_->params().entries()[idx];
      for (int64_t i = 0; i < e.numel; ++i) grad_arena_.data()[e.offset + i] *= 1000.0f;
    }
  }
  if (fault_planned("nan", mesh_->rank(), step_ + 1)) {  // injected: a NaN in this rank's loss and gradients
    r.loss = std::nan("");
    grad_arena_.data()[model_->params().entries()[optimizer_->owned().front()].offset] = std::nanf("");
  }
  r.rank_tokens = B * S * accum / mesh_->cp_size();
  r.tokens = B * S * accum * data_ranks;
  return r;
}

void Trainer::reduce_routing_over_world() {
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
  mesh_->world().all_reduce(buf, buf, size_t(n), DType::kF64, ReduceOp::kSum);
  n = 0;
  for (auto& s : routing) {
    for (int64_t e = 0; e < c.router_slots(); ++e) s.choices_N[e] = buf[n++];
    s.entropy_sum = buf[n++];
    s.tokens = buf[n++];
  }
}

const char* Trainer::skip_reason(const StepResult& r) const {
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return "nan";
  const int64_t next = step_ + 1;
  for (int64_t s : config_.ft.skip_steps)
    if (s == next) return "scheduled";
  // Spikes: z-score against the window of recent accepted steps (llm.c's outlier detector).
  const int64_t n = std::min<int64_t>(window_count_, kWindow);
  if (config_.ft.spike_z <= 0 || n < config_.ft.spike_warmup) return nullptr;
  auto z = [&](const std::vector<double>& w, double x) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) mean += w[i];
    mean /= double(n);
    for (int64_t i = 0; i < n; ++i) sq += (w[i] - mean) * (w[i] - mean);
    const double sd = std::sqrt(sq / double(n));
    return sd > 0 ? (x - mean) / sd : 0.0;
  };
  if (z(loss_window_, r.loss) > config_.ft.spike_z) return "loss-spike";
  if (z(gnorm_window_, r.grad_norm) > config_.ft.spike_z) return "grad-norm-spike";
  return nullptr;
}

void Trainer::apply_update(StepResult& r) {
  const ZayaConfig& c = model_->config();
  const double lr_scale = phase_lr_multiplier(plans_[phase_], step_);
  r.lr = config_.optim.lr * lr_scale;
  {
    ZAYA_PROFILE_SCOPE("optim.step");
    // One all-reduce for the loss parts and the squared gradient norm of every shard.
    double sums[3] = {r.loss, r.router_loss, optimizer_->owned_sum_squares(grad_arena_.data())};
    if (distributed_) mesh_->world().all_reduce(sums, sums, 3, DType::kF64, ReduceOp::kSum);
    r.loss = sums[0] / double(r.tokens);
    r.router_loss = sums[1] / double(config_.run.grad_accum * mesh_->world_size());
    r.grad_norm = std::sqrt(sums[2]);
    // The values are global, so every rank takes the same decision.
    r.skipped = skip_reason(r);
    if (r.skipped == nullptr) {
      const double clip = (config_.optim.grad_clip > 0 && r.grad_norm > config_.optim.grad_clip)
                              ? config_.optim.grad_clip / r.grad_norm
                              : 1.0;
      optimizer_->update(model_->param_data(), grad_arena_.data(), lr_scale, clip);
      if (distributed_) sync_->all_gather_parameters();
    }
    if (distributed_) {
      reduce_routing_over_world();
      r.grad_reduce_exposed = sync_->exposed_seconds();
      r.grad_reduce_overlapped = std::max(0.0, sync_->in_flight_seconds() - sync_->exposed_seconds());
      r.param_gather = r.skipped == nullptr ? sync_->gather_seconds() : 0.0;
    }
  }
  r.expert_exchange = workspace_->exchange_seconds();
  double routed_rows = 0;
  for (int64_t l = 0; l < c.num_blocks; ++l) {
    choice_counts_[l] = workspace_->routing()[l].choices_N;
    for (int64_t e = 0; e < c.experts; ++e) routed_rows += choice_counts_[l][e];
  }
  ++step_;
  r.step = step_;
  if (r.skipped == nullptr) {
    // Balancing biases from the whole step's routing (global batch): identical on every rank.
    balance_->update(choice_counts_, model_->balancing_biases());
    remember(r);
    consecutive_skips_ = 0;
  } else {
    incident("skipped-step", fmt::format("step {}: {} (loss {:.6g}, gradient norm {:.6g}); the update was not applied",
                                         r.step, r.skipped, r.loss, r.grad_norm));
    ++consecutive_skips_;
    if (config_.ft.rollback_after > 0 && consecutive_skips_ >= config_.ft.rollback_after) rollback_pending_ = true;
  }
  // Model FLOPs done by this rank: its tokens (1 / cp of its sequences, with
  // the same share of causal attention under zig-zag), and its share of the routed rows.
  const double W = double(mesh_->world_size()), cp = double(mesh_->cp_size());
  r.flops = 3.0 *
            model_forward_flops(c, config_.run.micro_batch * config_.run.grad_accum, config_.run.seq_len,
                                routed_rows / W * cp) /
            cp;
}

double Trainer::validation_loss() {
  ZAYA_CHECK(val_data_ != nullptr, "no validation data (synthetic run)");
  const RunConfig& run = config_.run;
  val_data_->reset();
  double sum = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < run.eval_batches; ++i) {
    val_data_->next(ids_.data(), targets_.data(), run.micro_batch, run.seq_len, mesh_->data_rank(),
                    mesh_->data_ranks());
    LossParts parts =
        model_forward(*model_, *workspace_, ids_.data(), targets_.data(), run.micro_batch, run.seq_len, {});
    sum += parts.xent_sum;
    n += parts.xent_tokens;
  }
  double sums[2] = {sum, double(n)};
  if (distributed_) mesh_->world().all_reduce(sums, sums, 2, DType::kF64, ReduceOp::kSum);
  return sums[0] / sums[1];
}

void Trainer::log_metrics(const StepResult& r, double elapsed, double eta_seconds) {
  if (metrics_ == nullptr) return;
  const ZayaConfig& c = model_->config();
  std::string routing;
  for (int64_t l = 0; l < c.num_blocks; ++l) {
    const RoutingStats& s = workspace_->routing()[l];
    double total = 0;
    for (double v : s.choices_N) total += v;
    std::string load;
    for (int64_t e = 0; e < c.experts; ++e) load += fmt::format("{}{:.4f}", e ? "," : "", s.choices_N[e] / total);
    const double skip = c.use_skip ? s.choices_N[c.experts] / total : 0.0;
    routing += fmt::format("{}{{\"layer\":{},\"load\":[{}],\"skip\":{:.4f},\"entropy\":{:.4f}}}", l ? "," : "",
                           2 * l + 1, load, skip, s.entropy_sum / s.tokens);
  }
  fmt::print(metrics_,
             "{{\"step\":{},\"loss\":{:.6f},\"router_loss\":{:.6f},\"lr\":{:.6e},\"grad_norm\":{:.5f},"
             "\"tokens\":{},\"step_seconds\":{:.4f},\"tokens_per_second\":{:.1f},\"mfu\":{:.4f},\"elapsed\":{:.2f},"
             "\"eta\":{:.1f},{}\"routing\":[{}]}}\n",
             r.step, r.loss, r.router_loss, r.lr, r.grad_norm, r.tokens, r.seconds, double(r.tokens) / r.seconds,
             r.flops / r.seconds / (peak_gflops_ * 1e9), elapsed, eta_seconds,
             r.skipped ? fmt::format("\"skipped\":\"{}\",", r.skipped) : "", routing);
  std::fflush(metrics_);
}

void Trainer::write_loss_plot() const {
  LinePlotOptions o;
  o.title = fmt::format("zaya train: {} preset", config_.model_preset);
  o.x_label = "optimizer step";
  o.y_label = "cross-entropy (nats/token)";
  SvgLinePlot plot(o);
  plot.add_series("train loss", plot_steps_, plot_loss_);
  if (!plot_val_steps_.empty()) plot.add_series("validation loss", plot_val_steps_, plot_val_loss_);
  if (unigram_entropy_ > 0) plot.add_reference_line(unigram_entropy_, "unigram entropy of the corpus");
  plot.save(path_join(config_.run.out_dir, "loss.svg"));
}

void Trainer::save_final(const std::string& dir) {
  HfSaveOptions save;
  save.dtype = config_.run.save_dtype;
  // The model's config with the RoPE base it was trained with last (recipes change it from phase to phase).
  ZayaConfig c = model_->config();
  c.rope_theta = config_.model.rope_theta;
  if (mesh_->ep_size() == 1) {
    if (is_root()) save_hf_tensors(c, complete_model_tensors(*model_), dir, save);
    return;
  }
  // Expert parallel: gather every rank's expert region within its ep group
  // (collective on all ranks); rank 0 writes dense tensors and all experts.
  const ParamTable& mine = model_->params();
  const int64_t dense = mine.dense_floats(), region = mine.total_floats() - dense;
  std::vector<float> gathered(size_t(region) * mesh_->ep_size());
  std::vector<int64_t> counts(mesh_->ep_size(), region);
  mesh_->ep().all_gather_v(model_->param_data() + dense, gathered.data(), counts.data(), DType::kF32);
  if (!is_root()) return;
  // Where every tensor is now, then the canonical order of a full table
  // (so the file is the same whatever ep was).
  std::map<std::string, const float*> where;
  for (const ParamEntry& e : mine.entries())
    if (e.offset < dense) where[e.name] = model_->param_data() + e.offset;
  const int64_t local = c.experts / mesh_->ep_size();
  for (int r = 0; r < mesh_->ep_size(); ++r) {
    const ParamTable table(c, true, ExpertRange{r * local, local});
    for (const ParamEntry& e : table.entries())
      if (e.offset >= dense) where[e.name] = gathered.data() + r * region + (e.offset - dense);
  }
  std::vector<NamedTensor> tensors;
  const ParamTable full(c, true);
  for (const ParamEntry& e : full.entries()) tensors.push_back({e.name, e.shape, where.at(e.name), false});
  for (const ParamEntry& e : model_->buffers().entries())
    tensors.push_back({e.name, e.shape, model_->buffer_data() + e.offset, true});
  save_hf_tensors(c, tensors, dir, save);
}

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int) { g_stop_signal = 1; }

}  // namespace

void Trainer::install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool Trainer::stop_requested() {
  int32_t flag = g_stop_signal ? 1 : 0;
  const std::string control = path_join(path_join(config_.run.out_dir, "control"), "stop");
  if (is_root() && std::filesystem::exists(control)) {
    flag = 1;
    std::error_code ec;
    std::filesystem::remove(control, ec);
  }
  if (distributed_) mesh_->world().all_reduce(&flag, &flag, 1, DType::kI32, ReduceOp::kMax);
  return flag != 0;
}

void Trainer::inject_faults_at_step_start() {
  const int rank = mesh_->rank();
  const int64_t s = step_ + 1;
  if (fault_planned("kill", rank, s)) std::raise(SIGKILL);
  if (fault_planned("hang", rank, s))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // no heartbeat, no progress
  if (fault_planned("preempt", rank, s)) std::raise(SIGTERM);
}

void Trainer::incident(const std::string& event, const std::string& detail) {
  if (!is_root()) return;
  fmt::print(stderr, "warning: {}: {}\n", event, detail);
  if (!outputs_enabled_) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const nlohmann::json j = {
      {"time", now}, {"source", "trainer"}, {"event", event}, {"step", step_}, {"detail", detail}};
  append_line(path_join(config_.run.out_dir, "incidents.jsonl"), j.dump());
}

void Trainer::guarded_save(const std::function<void()>& save) {
  try {
    save();
  } catch (const CollectiveError& e) {
    // Every rank saw the failure; the previous checkpoints are intact.
    if (config_.ft.on_save_error == "stop") throw;
    incident("save-failed", std::string(e.what()) + "; training continues, the next save will try again");
  }
}

void Trainer::report_stragglers(double my_seconds, int64_t step) {
  const int W = mesh_->world_size();
  straggler_times_.resize(size_t(W));
  mesh_->world().all_gather(&my_seconds, straggler_times_.data(), 1, DType::kF64);
  const auto [lo, hi] = std::minmax_element(straggler_times_.begin(), straggler_times_.end());
  const int slowest = int(hi - straggler_times_.begin());
  if (metrics_)
    fmt::print(metrics_, "{{\"step\":{},\"rank_step_seconds\":[{:.4f}],\"slowest_rank\":{}}}\n", step,
               fmt::join(straggler_times_, ","), slowest);
  if (*lo > 0 && *hi > config_.ft.straggler_ratio * *lo)
    incident("straggler", fmt::format("rank {} took {:.3f} s over the last steps, the fastest rank {:.3f} s ({:.1f}x)",
                                      slowest, *hi, *lo, *hi / *lo));
}

void Trainer::rollback() {
  rollback_pending_ = false;
  consecutive_skips_ = 0;
  if (writer_) guarded_save([&] { writer_->finish(); });
  // The newest checkpoint (rank 0 chooses, everyone loads the same one).
  std::string path;
  if (is_root()) {
    const auto all = list_checkpoints(config_.checkpoint_dir());
    if (!all.empty()) path = all.back();
  }
  int64_t length = int64_t(path.size());
  mesh_->world().broadcast(&length, 1, DType::kI64, 0);
  path.resize(size_t(length));
  mesh_->world().broadcast(path.data(), size_t(length), DType::kU8, 0);
  if (path.empty())
    throw CollectiveError(
        fmt::format("{} consecutive steps were skipped (up to step {}) and there is no checkpoint "
                    "to roll back to; lower the learning rate or check the data",
                    config_.ft.rollback_after, step_));
  if (++rollbacks_[path] > config_.ft.max_rollbacks)
    throw CollectiveError(fmt::format("rolled back to {} {} times and the trouble persists (up to step {}); stopping",
                                      path, config_.ft.max_rollbacks, step_));
  const int64_t bad = step_;
  const SamplerState data = train_data_->state();
  const size_t bad_phase = phase_;
  run_collectively(mesh_->world(), "rolling back to " + path, [&] { resume_from(CheckpointReader::open(path)); });
  // Continue with the data after the offending window: the batches of steps
  // (checkpoint, bad] are not seen again. A checkpoint in an earlier recipe
  // phase replays that phase from the checkpoint, and the bad phase, when the
  // run enters it again, starts after its bad batches.
  if (phase_ == bad_phase)
    train_data_->set_state(data);
  else
    data_after_rollback_.emplace(bad_phase, data);
  incident("rollback", fmt::format("{} consecutive skipped steps up to step {}: rolled back to {} (step {}) and "
                                   "skipped the data of steps {}..{}",
                                   config_.ft.rollback_after, bad, path, step_, step_ + 1, bad));
  if (metrics_) {
    std::fclose(metrics_);
    metrics_ = nullptr;
    plot_steps_.clear();
    plot_loss_.clear();
    plot_val_steps_.clear();
    plot_val_loss_.clear();
    open_outputs(true);  // keeps the records up to the checkpoint's step
  }
}

void Trainer::enter_phase(size_t phase) {
  if (phase == phase_) return;
  const PhasePlan& p = plans_[phase];
  phase_ = phase;
  RunConfig& run = config_.run;
  run.micro_batch = p.micro_batch;
  run.seq_len = p.seq_len;
  config_.model.rope_theta = p.rope_theta;
  if (p.cp != mesh_->cp_size()) {
    // Another context-parallel layout: new cp groups (ep = 1, checked by the
    // config); a pending checkpoint is published first, and the next one is
    // written with the new layout.
    const bool had_writer = writer_ != nullptr;
    if (had_writer) {
      guarded_save([&] { writer_->finish(); });
      writer_.reset();
    }
    workspace_.reset();  // holds the old cp communicator
    mesh_->set_cp(p.cp);
    if (had_writer) ensure_checkpoint_writer();
  }
  // The workspace holds everything shaped by the batch and the RoPE table
  // (built from model.rope_theta): a new one for the phase's shape, built as
  // the constructor builds it. The old one goes first (memory).
  workspace_.reset();
  workspace_ = std::make_unique<ModelWorkspace>(config_.model, run.micro_batch, run.seq_len, true,
                                                mesh_->ep_size() > 1 ? &mesh_->ep() : nullptr,
                                                mesh_->cp_size() > 1 ? &mesh_->cp() : nullptr);
  ids_.assign(size_t(run.micro_batch * run.seq_len), 0);
  targets_.assign(size_t(run.micro_batch * run.seq_len), 0);
  if (recipe_data_) {
    auto train = recipe_data_->train_source(phase, run.seq_len, run.seed);
    mixture_ = train.get();
    train_data_ = std::move(train);
    val_data_ = recipe_data_->val_source(phase, run.seq_len);
  }
}

void Trainer::announce_phase() {
  if (config_.phases.empty()) return;
  const PhasePlan& p = plans_[phase_];
  if (!options_.quiet) {
    fmt::print("{}\n", describe_phase(config_, phase_, p));
    std::fflush(stdout);
  }
  // "step" is the phase's first step (records up to a checkpoint's step are kept on resume).
  if (metrics_)
    fmt::print(metrics_,
               "{{\"step\":{},\"phase\":{},\"name\":{},\"steps\":{},\"micro_batch\":{},\"seq_len\":{},"
               "\"rope_theta\":{},\"peak_lr\":{:.6e}}}\n",
               p.first_step + 1, phase_ + 1, nlohmann::json(p.name).dump(), p.steps, p.micro_batch, p.seq_len,
               p.rope_theta, config_.optim.lr * p.lr_ratio);
}

TrainSummary Trainer::run() {
  const RunConfig& run = config_.run;
  const ZayaConfig& c = model_->config();
  const ParamCounts counts = count_parameters(c);
  if (!options_.quiet) {
    fmt::print("zaya train: {} preset, {:.2f}M parameters ({:.2f}M active), vocab {} ({} padded)\n",
               config_.model_preset, counts.total / 1e6, counts.active / 1e6, c.real_vocab_size, c.vocab_size);
    fmt::print("  {} steps x {} tokens ({} x {} x {} accum), {} threads, f32 GEMM peak {:.0f} GFLOP/s\n", run.steps,
               run.tokens_per_step(), run.micro_batch, run.seq_len, run.grad_accum, omp_get_max_threads(),
               peak_gflops_);
    if (unigram_entropy_ > 0)
      fmt::print("  unigram entropy of the training data: {:.3f} nats/token\n", unigram_entropy_);
    std::fflush(stdout);
  }
  // Checkpoints: never write over another run's; continue this run's.
  run_collectively(mesh_->world(), "checking the checkpoint directory", [&] {
    if (is_root() && !resumed_ && !list_checkpoints(config_.checkpoint_dir()).empty())
      fail(
          "{} already holds checkpoints (latest {}); pass --resume to continue that run, or choose another "
          "train.out_dir / checkpoint.dir",
          config_.checkpoint_dir(), list_checkpoints(config_.checkpoint_dir()).back());
  });
  const bool checkpoints = config_.checkpoint.every > 0 || config_.checkpoint.final;
  if (checkpoints && outputs_enabled_) ensure_checkpoint_writer();
  open_outputs(resumed_);
  TrainSummary summary;
  summary.unigram_entropy = unigram_entropy_;
  summary.peak_gflops = peak_gflops_;
  double val = NAN;
  const double t_start = now_seconds();
  double train_seconds = 0, train_flops = 0;
  int64_t train_tokens = 0;
  const int64_t first = step();
  const int64_t last_step = options_.stop_at > 0 ? std::min(options_.stop_at, run.steps) : run.steps;
  install_stop_handlers();
  bool first_step = true;
  if (step_ == plans_[phase_].first_step) announce_phase();
  while (step_ < last_step) {
    if (phase_ + 1 < plans_.size() && step_ >= plans_[phase_ + 1].first_step) {
      enter_phase(phase_at_step(plans_, step_));
      // A new sequence length, RoPE base or mixture moves the loss and the
      // gradient norm by design: the spike detector starts over (it judges
      // again after ft.spike_warmup accepted steps of the new phase).
      window_count_ = 0;
      if (data_after_rollback_ && data_after_rollback_->first == phase_) {
        // Rolled back into the previous phase: skip this phase's bad batches now.
        train_data_->set_state(data_after_rollback_->second);
        data_after_rollback_.reset();
      }
      announce_phase();
    }
    heartbeat_.beat("step", step_ + 1);
    guarded_save([&] {
      if (writer_) writer_->poll();  // publish a finished background save
    });
    inject_faults_at_step_start();
    if (stop_requested()) {
      incident("preempted", fmt::format("stop requested at step {}: saving a checkpoint and exiting with code {}",
                                        step_, kExitPreempted));
      heartbeat_.beat("checkpoint", step_);
      if (writer_) {
        writer_->finish();
        if (last_saved_step_ != step_) save_checkpoint(false);
      }
      throw Preempted();
    }
    StepResult r = train_step();
    straggler_seconds_ += r.compute_seconds;
    if (rollback_pending_) {
      rollback();
      continue;
    }
    if (writer_ && config_.checkpoint.every > 0 && r.step % config_.checkpoint.every == 0) {
      heartbeat_.beat("checkpoint", r.step);
      guarded_save([&] { save_checkpoint(config_.checkpoint.async); });
    }
    if (first_step) summary.first_loss = r.loss;
    first_step = false;
    summary.final_loss = r.loss;
    train_seconds += r.seconds;
    train_flops += r.flops;
    train_tokens += r.tokens;
    const bool last = r.step == last_step;
    const bool eval = val_data_ != nullptr && ((run.eval_every > 0 && r.step % run.eval_every == 0) || last ||
                                               r.step == plans_[phase_].end_step());
    if (eval) {
      heartbeat_.beat("eval", r.step);
      val = validation_loss();
      plot_val_steps_.push_back(double(r.step));
      plot_val_loss_.push_back(val);
      if (metrics_) fmt::print(metrics_, "{{\"step\":{},\"val_loss\":{:.6f}}}\n", r.step, val);
    }
    if (r.step % run.log_every == 0 || last || eval) {
      if (distributed_) report_stragglers(straggler_seconds_, r.step);
      straggler_seconds_ = 0;
      const double elapsed = now_seconds() - t_start;
      const double per_step = train_seconds / double(std::max<int64_t>(1, r.step - first));
      const double eta = per_step * double(run.steps - r.step);
      plot_steps_.push_back(double(r.step));
      plot_loss_.push_back(r.loss);
      log_metrics(r, elapsed, eta);
      if (!options_.quiet) {
        fmt::print(
            "step {:>6}/{} | loss {:.4f} | val {} | lr {:.2e} | gnorm {:.3f} | {} tok/s | MFU {:.1f}% | {} | "
            "ETA {}{}\n",
            r.step, run.steps, r.loss, std::isnan(val) ? std::string("  -   ") : fmt::format("{:.4f}", val), r.lr,
            r.grad_norm, format_rate(double(train_tokens) / train_seconds),
            100.0 * train_flops / train_seconds / (peak_gflops_ * 1e9), format_duration(elapsed), format_duration(eta),
            r.skipped ? fmt::format(" | SKIPPED ({})", r.skipped) : "");
        std::fflush(stdout);
      }
    }
  }
  heartbeat_.beat("finishing", step_);
  summary.steps = step();
  summary.final_val_loss = val;
  summary.seconds = now_seconds() - t_start;
  summary.tokens_per_second = double(train_tokens) / train_seconds;
  summary.mfu = train_flops / train_seconds / (peak_gflops_ * 1e9);  // this rank's FLOPs against one rank's peak
  if (writer_) {
    guarded_save([&] {
      writer_->finish();
      if (config_.checkpoint.final && last_saved_step_ != step()) save_checkpoint(false);
    });
  }
  summary.weights_dir = path_join(run.out_dir, "final");
  if (outputs_enabled_) save_final(summary.weights_dir);
  if (options_.write_outputs) {
    if (!config_.data.tokenizer.empty())
      std::filesystem::copy_file(config_.data.tokenizer, path_join(summary.weights_dir, "tokenizer.model"),
                                 std::filesystem::copy_options::overwrite_existing);
    if (!plot_steps_.empty()) write_loss_plot();
    if (!options_.quiet)
      fmt::print("saved weights to {} (config.json, model.safetensors{}); metrics in {}; plot {}\n",
                 summary.weights_dir, config_.data.tokenizer.empty() ? "" : ", tokenizer.model",
                 path_join(run.out_dir, "metrics.jsonl"), path_join(run.out_dir, "loss.svg"));
  }
  return summary;
}

}  // namespace zaya
