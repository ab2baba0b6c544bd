#include "zaya/rl/rl_job.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/data/chat_template.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/io/append_file.h"
#include "zaya/io/atomic_file.h"
#include "zaya/optim/schedule.h"
#include "zaya/rl/grpo.h"
#include "zaya/rl/reward.h"
#include "zaya/rl/rl_batch.h"
#include "zaya/rl/trainer_sampler.h"
#include "zaya/train/final_weights.h"
#include "zaya/train/job_start.h"
#include "zaya/train/step_numerics.h"

namespace zaya {
namespace {

void check_rl_config(const TrainConfig& c) {
  const std::string& src = c.source;
  ZAYA_CHECK(c.rl.enabled, "{}: has no [rl] section; `zaya rl` needs one (rl.prompts at least; docs/rl.md)", src);
  ZAYA_CHECK(!c.data.tokenizer.empty(),
             "{}: data.tokenizer is missing; `zaya rl` encodes the prompts and decodes the samples with it", src);
  ZAYA_CHECK(c.phases.empty(), "{}: [[phase]] tables are not allowed with [rl]; allowed: one [train] section", src);
  ZAYA_CHECK(c.parallel.ep == 1 && c.parallel.cp == 1,
             "{}: parallel.ep = {}, parallel.cp = {}: `zaya rl` runs on one process; allowed: 1 and 1", src,
             c.parallel.ep, c.parallel.cp);
  ZAYA_CHECK(c.run.loss_chunk == 0,
             "{}: train.loss_chunk = {}: the policy loss weighs each token's gradient; allowed: 0", src,
             c.run.loss_chunk);
  ZAYA_CHECK(!c.lora.enabled || c.lora.dropout == 0,
             "{}: lora.dropout = {}: the loss's log-probabilities must be the old policy's bit for bit; allowed: 0",
             src, c.lora.dropout);
}

// The old policy's (or the reference's) log-probability of every target: -token loss of a forward per micro-batch.
void target_logprobs(const ModelWorkspace& ws, const int32_t* targets, int64_t rows, float* out) {
  const float* loss = ws.token_loss();
  for (int64_t t = 0; t < rows; ++t) out[t] = targets[t] >= 0 ? -loss[t] : 0.0f;
}

// Routing replay's counts over the MoE layers since the workspace's last reset_routing() (docs/rl.md).
struct RoutingFlips {
  double compared = 0, flips = 0, used = 0;
  double rate() const { return compared > 0 ? flips / compared : 0.0; }
  double used_rate() const { return compared > 0 ? used / compared : 0.0; }
};

RoutingFlips routing_flips(ModelWorkspace& ws) {
  RoutingFlips f;
  for (const RoutingStats& s : ws.routing()) {
    f.compared += s.replay_compared;
    f.flips += s.replay_flips;
    f.used += s.replay_used_flips;
  }
  return f;
}

}  // namespace

// The job's state (named outside the anonymous namespace: its member lambdas go into std::function).
struct RlStepRecord {
  nlohmann::ordered_json j;
  double reward_mean = 0;
};

class RlRun {
 public:
  RlRun(TrainConfig config, const RlJobOptions& options);
  RlSummary run();

 private:
  double evaluate(int64_t step);
  std::vector<const RlPrompt*> next_prompts();
  RlStepRecord step(int64_t step);
  std::vector<RolloutSample> rollout(const std::vector<const RlPrompt*>& prompts, uint64_t seed, RolloutStats& rs);
  void reference_logprobs();
  void save_outputs(RlSummary& s);

  TrainConfig config_;
  const RlConfig& rl_;
  RlJobOptions options_;
  Tokenizer tok_;
  std::vector<RlPrompt> prompts_, eval_;
  std::string metrics_;
  std::unique_ptr<ProcessMesh> mesh_;
  std::unique_ptr<StepNumerics> numerics_;
  std::unique_ptr<ZayaModel> ref_model_;  // full-parameter KL reference (LoRA: the base itself)
  std::unique_ptr<ModelWorkspace> ref_ws_;
  std::unique_ptr<RolloutBatches> batches_;
  RolloutSettings sampling_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  uint64_t epoch_ = 0;
  int64_t optimizer_steps_ = 0;
  std::vector<float> old_, ref_, weights_, logp_;
};

namespace {

TrainConfig prepared(TrainConfig c) {
  check_rl_config(c);
  if (c.run.threads > 0) omp_set_num_threads(c.run.threads);
  const int64_t rows = c.rl.prompts_per_step * c.rl.group_size;
  c.run.grad_accum = (rows + c.run.micro_batch - 1) / c.run.micro_batch;
  c.schedule.total_steps = c.run.steps * c.rl.updates_per_rollout;  // the schedule counts optimizer steps
  return c;
}

}  // namespace

RlRun::RlRun(TrainConfig config, const RlJobOptions& options)
    : config_(prepared(std::move(config))),
      rl_(config_.rl),
      options_(options),
      tok_(Tokenizer::load(config_.data.tokenizer)) {
  if (config_.vocab_from_tokenizer) {
    config_.model.real_vocab_size = tok_.vocab_size();
    config_.model.vocab_size = (tok_.vocab_size() + 127) / 128 * 128;
  }
  config_.model.validate(config_.source);
  RlPromptRules rules{rl_.reward == RewardKind::kCommand ? "" : rl_.answer_field, rl_.max_new_tokens,
                      config_.run.seq_len};
  prompts_ = read_rl_prompts(rl_.prompts, tok_, rules);
  if (!rl_.eval_prompts.empty()) eval_ = read_rl_prompts(rl_.eval_prompts, tok_, rules);
  mesh_ = std::make_unique<ProcessMesh>(make_self_comm(), 1);
  numerics_ = std::make_unique<StepNumerics>(config_, *mesh_);
  if (!config_.init_from.empty()) load_init_weights(config_, numerics_->model());
  const RunConfig& run = config_.run;
  batches_ = std::make_unique<RolloutBatches>(run.micro_batch, run.seq_len, run.grad_accum);
  batches_->keep_routing(config_.model.num_blocks, config_.model.top_k);  // routing replay and the flip rate
  const size_t positions = size_t(batches_->positions());
  old_.assign(positions, 0.0f);
  weights_.assign(positions, 0.0f);
  logp_.assign(size_t(run.micro_batch * run.seq_len), 0.0f);
  if (rl_.kl_coef > 0) {
    ref_.assign(positions, 0.0f);
    ref_ws_ = std::make_unique<ModelWorkspace>(config_.model, run.micro_batch, run.seq_len, false);
    if (numerics_->lora() == nullptr) {
      // A frozen copy of the starting weights.
      ref_model_ = std::make_unique<ZayaModel>(config_.model);
      ZayaModel& m = numerics_->model();
      std::memcpy(ref_model_->param_data(), m.param_data(), sizeof(float) * size_t(m.params().total_floats()));
      std::memcpy(ref_model_->buffer_data(), m.buffer_data(), sizeof(float) * size_t(m.buffers().total_floats()));
      if (numerics_->bf16_gemms()) ref_model_->enable_bf16_gemms();
    }
    if (numerics_->bf16_gemms()) ref_ws_->reserve_bf16_gemms();
  }
  sampling_.sampling.temperature = rl_.temperature;
  sampling_.sampling.top_p = rl_.top_p;
  sampling_.sampling.top_k = rl_.top_k;
  sampling_.max_new_tokens = rl_.max_new_tokens;
  const ChatStop chat = chat_stop(tok_);
  sampling_.stop_ids = chat.ids;
  sampling_.stop_ids.push_back(tok_.eos_id());
  sampling_.stop_strings = chat.strings;
  for (const std::string& s : rl_.stop) sampling_.stop_strings.push_back(s);
  sampling_.bf16_activations = numerics_->bf16_gemms();
  order_.resize(prompts_.size());
  cursor_ = order_.size();  // the first call shuffles
  std::filesystem::create_directories(run.out_dir);
  metrics_ = (std::filesystem::path(run.out_dir) / "metrics.jsonl").string();
  std::filesystem::remove(metrics_);
  write_file_atomic((std::filesystem::path(run.out_dir) / "config.toml").string(), train_config_to_toml(config_));
}

std::vector<const RlPrompt*> RlRun::next_prompts() {
  std::vector<const RlPrompt*> out;
  while (int64_t(out.size()) < rl_.prompts_per_step) {
    if (cursor_ == order_.size()) {
      // A new epoch: a Fisher-Yates shuffle from (seed, epoch).
      Rng rng{config_.run.seed, 0x524c, epoch_++};
      for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
      for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[size_t(rng.next_below(i))]);
      cursor_ = 0;
    }
    out.push_back(&prompts_[order_[cursor_++]]);
  }
  return out;
}

namespace {

// The decoder over the current weights (views of the float32 arena; LoRA: a copy of the adapters).
std::unique_ptr<InferModel> decoder_of(StepNumerics& n, const TrainConfig& c) {
  const ZayaModel& m = n.model();
  std::unique_ptr<InferModel> im = InferModel::from_model(m, m.storage() == ParamStorage::kF32 ? "f32" : "auto");
  if (const LoraAdapters* a = n.lora()) {
    auto copy = std::make_unique<LoraAdapters>(c.model, c.lora);
    std::memcpy(copy->data(), a->data(), sizeof(float) * size_t(a->total_floats()));
    im->set_lora(std::move(copy));
  }
  return im;
}

std::vector<double> rewards_of(const RlConfig& rl, const std::vector<RolloutSample>& samples, int64_t group) {
  std::vector<RewardItem> items;
  for (size_t k = 0; k < samples.size(); ++k) {
    const RolloutSample& s = samples[k];
    items.push_back({&s.prompt->record, &s.prompt->text, s.text,
                     group > 1 ? fmt::format("{} (sample {})", s.prompt->where, int64_t(k) % group) : s.prompt->where});
  }
  return score_completions(rl, items);
}

}  // namespace

double RlRun::evaluate(int64_t step) {
  std::vector<const RlPrompt*> ps;
  for (const RlPrompt& p : eval_) ps.push_back(&p);
  RolloutSettings greedy = sampling_;
  greedy.sampling.temperature = 0;
  const std::unique_ptr<InferModel> im = decoder_of(*numerics_, config_);
  const std::vector<double> r = rewards_of(rl_, run_rollout(*im, tok_, ps, 1, greedy, 0), 1);
  double mean = 0;
  for (double x : r) mean += x / double(r.size());
  nlohmann::ordered_json j = {{"step", step}, {"eval_reward", mean}, {"eval_prompts", r.size()}};
  append_line(metrics_, j.dump());
  if (!options_.quiet)
    fmt::print("eval step {}: mean reward {:.4f} over {} held-out prompts (greedy)\n", step, mean, r.size());
  return mean;
}

void RlRun::reference_logprobs() {
  const int64_t B = batches_->micro(), S = batches_->seq();
  ZayaModel& model = numerics_->model();
  const ZayaModel& ref = ref_model_ ? *ref_model_ : model;
  const LoraAdapters* adapters = model.lora();
  if (!ref_model_) model.set_lora(nullptr);  // LoRA: the base is the reference
  for (int64_t a = 0; a < batches_->accum(); ++a) {
    const int64_t at = a * B * S;
    model_forward(ref, *ref_ws_, batches_->ids() + at, batches_->targets() + at, B, S, {});
    target_logprobs(*ref_ws_, batches_->targets() + at, B * S, ref_.data() + at);
  }
  model.set_lora(adapters);
}

std::vector<RolloutSample> RlRun::rollout(const std::vector<const RlPrompt*>& prompts, uint64_t seed,
                                          RolloutStats& rs) {
  if (!rl_.sample_with_trainer)
    return run_rollout(*decoder_of(*numerics_, config_), tok_, prompts, rl_.group_size, sampling_, seed, &rs);
  // The trainer's own forward of the step's rows (docs/rl.md "Parity"): its bf16 copy current, dropout off.
  const RunConfig& run = config_.run;
  const RowsForward forward = [&](int64_t, const int32_t* ids) -> const float* {
    numerics_->forward_only(ids, nullptr, run.micro_batch, run.seq_len);
    return numerics_->workspace().logits();
  };
  const TrainerRows rows{run.micro_batch, run.seq_len, run.grad_accum, config_.model.vocab_size,
                         config_.model.real_vocab_size};
  return sample_with_trainer(forward, rows, tok_, prompts, rl_.group_size, sampling_, seed, &rs);
}

RlStepRecord RlRun::step(int64_t step) {
  const RunConfig& run = config_.run;
  const int64_t B = run.micro_batch, S = run.seq_len, G = rl_.group_size;
  const double t0 = now_seconds();
  const std::vector<const RlPrompt*> prompts = next_prompts();
  RolloutStats rs;
  const uint64_t seed = config_.run.seed * 0x9E3779B97F4A7C15ull + uint64_t(step) * uint64_t(prompts.size() * G);
  const std::vector<RolloutSample> samples = rollout(prompts, seed, rs);
  const double t1 = now_seconds();
  const std::vector<double> rewards = rewards_of(rl_, samples, G);
  const double t2 = now_seconds();
  batches_->fill(samples, group_advantages(rewards, G, rl_.std_normalize));
  // The old policy: the trainer's forward of the same micro-batches as the update's (routed by the decoder's
  // experts with rl.routing_replay), counting where its routers differ from the decoder's (docs/rl.md).
  ModelWorkspace& tws = numerics_->workspace();
  tws.reset_routing();
  for (int64_t a = 0; a < batches_->accum(); ++a) {
    const int64_t at = a * B * S;
    tws.set_routing_record(batches_->routing(a), rl_.routing_replay);
    numerics_->forward_only(batches_->ids() + at, batches_->targets() + at, B, S);
    target_logprobs(numerics_->workspace(), batches_->targets() + at, B * S, old_.data() + at);
  }
  const RoutingFlips flips = routing_flips(tws);
  tws.set_routing_record(nullptr, false);
  if (ref_ws_) reference_logprobs();
  // The decoder against the trainer on the sampled tokens (the loss uses the trainer's: docs/rl.md "Parity").
  double dec_max = 0, dec_kl = 0, dec_rmin = 1e300, dec_rmax = -1e300, targets = 0;
  int64_t dec_differ = 0;  // sampled tokens whose rollout log-probability differs in any bit from the trainer's
  for (int64_t t = 0; t < batches_->positions(); ++t) {
    if (batches_->targets()[t] < 0) continue;
    dec_differ += std::memcmp(&old_[size_t(t)], batches_->decoder_logprobs() + t, sizeof(float)) != 0 ? 1 : 0;
    const double d = double(old_[size_t(t)]) - double(batches_->decoder_logprobs()[t]);
    dec_max = std::max(dec_max, std::fabs(d));
    dec_kl += std::exp(d) - d - 1.0;
    dec_rmin = std::min(dec_rmin, std::exp(d));
    dec_rmax = std::max(dec_rmax, std::exp(d));
    targets += 1;
  }
  const double t3 = now_seconds();
  PolicyStats all, first;
  int64_t mismatched = 0;
  int64_t update = 0;
  const StepNumerics::TokenWeigher weigh = [&](int64_t a, const ModelWorkspace& ws) -> const float* {
    const int64_t at = a * B * S;
    const int32_t* tg = batches_->targets() + at;
    target_logprobs(ws, tg, B * S, logp_.data());
    PolicyStats s;
    policy_token_weights(logp_.data(), old_.data() + at, ref_ws_ ? ref_.data() + at : nullptr,
                         batches_->advantages() + at, tg, B * S, rl_.clip, rl_.kl_coef, weights_.data() + at, s);
    if (update == 0) {
      for (int64_t t = 0; t < B * S; ++t) {
        if (tg[t] < 0) continue;
        s.entropy_sum += row_entropy(ws.logits() + t * config_.model.vocab_size, config_.model.real_vocab_size);
        mismatched += std::memcmp(&logp_[size_t(t)], &old_[size_t(at + t)], sizeof(float)) != 0 ? 1 : 0;
      }
      first.add(s);
    }
    all.add(s);
    return weights_.data() + at;
  };
  const StepNumerics::MicroBatchHook replay = [&](int64_t a, ModelWorkspace& w) {
    w.set_routing_record(batches_->routing(a), rl_.routing_replay);
  };
  StepResult r;
  RoutingFlips update_flips;
  for (update = 0; update < rl_.updates_per_rollout; ++update) {
    batches_->reset();
    r = StepResult{};
    numerics_->compute_gradients(*batches_, r, &weigh, &replay);
    if (update == 0) update_flips = routing_flips(tws);
    tws.set_routing_record(nullptr, false);
    numerics_->reduce_totals(r);
    const double lr_scale = lr_multiplier(config_.schedule, optimizer_steps_++);
    r.lr = config_.optim.lr * lr_scale;
    numerics_->update(r, lr_scale, true);
  }
  const double t4 = now_seconds();
  double mean = 0, var = 0, len = 0;
  for (double x : rewards) mean += x / double(rewards.size());
  for (double x : rewards) var += (x - mean) * (x - mean) / double(rewards.size());
  for (const RolloutSample& s : samples) len += double(s.tokens.size()) / double(samples.size());
  const double n = std::max(first.tokens, 1.0);
  RlStepRecord out;
  out.reward_mean = mean;
  out.j = {
      {"step", step},
      {"reward_mean", mean},
      {"reward_std", std::sqrt(var)},
      {"response_length", len},
      {"loss", all.loss_sum / std::max(all.tokens, 1.0)},
      {"kl_ref", ref_ws_ ? first.kl_sum / n : 0.0},
      {"clip_fraction", all.clipped / std::max(all.tokens, 1.0)},
      {"entropy", first.entropy_sum / n},
      {"grad_norm", r.grad_norm},
      {"lr", r.lr},
      {"completion_tokens", int64_t(first.tokens)},
      {"ratio_min", all.ratio_min},
      {"ratio_max", all.ratio_max},
      {"recompute_mismatches", mismatched},
      {"decoder_logp_max_abs_diff", dec_max},
      {"decoder_kl", targets > 0 ? dec_kl / targets : 0.0},
      {"decoder_ratio_min", dec_rmin},
      {"decoder_ratio_max", dec_rmax},
      {"rollout_logp_mismatches", dec_differ},
      {"routing_replay", rl_.routing_replay},
      {"flip_rate", flips.rate()},
      {"routed_flip_rate", flips.used_rate()},
      {"update_routed_flip_rate", update_flips.used_rate()},
      {"routing_choices", int64_t(flips.compared)},
      {"rollout_tokens_per_s", rs.seconds > 0 ? double(rs.generated_tokens) / rs.seconds : 0.0},
      {"update_tokens_per_s", t4 > t3 ? double(batches_->real_tokens() * rl_.updates_per_rollout) / (t4 - t3) : 0.0},
      {"rollout_seconds", t1 - t0},
      {"reward_seconds", t2 - t1},
      {"score_seconds", t3 - t2},
      {"update_seconds", t4 - t3}};
  append_line(metrics_, out.j.dump());
  if (!options_.quiet && (step == 1 || step % run.log_every == 0 || step == run.steps))
    fmt::print(
        "step {:>5}/{} | reward {:.3f} ± {:.3f} | len {:.1f} | kl {:.2e} | clip {:.3f} | entropy {:.3f} | "
        "decoder |dlogp| {:.1e} | flips {:.1e}{} | rollout {:.0f} tok/s | update {:.0f} tok/s\n",
        step, run.steps, mean, std::sqrt(var), len, ref_ws_ ? first.kl_sum / n : 0.0,
        all.clipped / std::max(all.tokens, 1.0), first.entropy_sum / n, dec_max, flips.rate(),
        rl_.routing_replay ? " (replayed)" : "", out.j["rollout_tokens_per_s"].get<double>(),
        out.j["update_tokens_per_s"].get<double>());
  return out;
}

void RlRun::save_outputs(RlSummary& s) {
  const std::filesystem::path out(config_.run.out_dir);
  if (const LoraAdapters* a = numerics_->lora()) {
    s.weights_dir = (out / "adapter").string();
    write_peft_adapter(s.weights_dir, *a, config_.init_from.empty() ? config_.model_preset : config_.init_from);
    return;
  }
  s.weights_dir = (out / "final").string();
  save_final_weights(numerics_->model(), config_.model, *mesh_, s.weights_dir,
                     enum_name<ValueDtype>(kValueDtypeNames, config_.run.save_dtype), config_.run.save_layout);
  std::filesystem::copy_file(config_.data.tokenizer, (std::filesystem::path(s.weights_dir) / "tokenizer.model"),
                             std::filesystem::copy_options::overwrite_existing);
}

RlSummary RlRun::run() {
  RlSummary s;
  const double t0 = now_seconds();
  if (!options_.quiet)
    fmt::print("zaya rl: {} prompts ({}), {} per step x {} samples, {} steps, {} held-out prompts; {} GEMMs{}\n",
               prompts_.size(), rl_.prompts, rl_.prompts_per_step, rl_.group_size, config_.run.steps, eval_.size(),
               numerics_->bf16_gemms() ? "bf16" : "f32", numerics_->lora() ? ", LoRA" : "");
  s.eval_prompts = int64_t(eval_.size());
  if (!eval_.empty()) s.eval_before = evaluate(0);
  for (int64_t k = 1; k <= config_.run.steps; ++k) {
    const RlStepRecord r = step(k);
    if (k == 1) s.first_reward = r.reward_mean;
    s.last_reward = r.reward_mean;
    s.steps = k;
    if (!eval_.empty() && rl_.eval_every > 0 && k % rl_.eval_every == 0 && k != config_.run.steps) evaluate(k);
  }
  if (!eval_.empty()) s.eval_after = evaluate(config_.run.steps);
  save_outputs(s);
  s.seconds = now_seconds() - t0;
  return s;
}

RlSummary run_rl(TrainConfig config, const RlJobOptions& options) {
  RlRun job(std::move(config), options);
  return job.run();
}

}  // namespace zaya
