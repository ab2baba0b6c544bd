#include "zaya/rl/rl_job.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/core/timer.h"
#include "zaya/data/chat_template.h"
#include "zaya/dist/collective.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/io/heartbeat.h"
#include "zaya/optim/schedule.h"
#include "zaya/rl/expert_gather.h"
#include "zaya/rl/grpo.h"
#include "zaya/rl/prompt_order.h"
#include "zaya/rl/reward.h"
#include "zaya/rl/rl_batch.h"
#include "zaya/rl/rl_checkpoint.h"
#include "zaya/rl/rl_dist.h"
#include "zaya/rl/trainer_sampler.h"
#include "zaya/train/checkpoint_manager.h"
#include "zaya/train/fault_seam.h"
#include "zaya/train/final_weights.h"
#include "zaya/train/job_start.h"
#include "zaya/train/run_log.h"
#include "zaya/train/step_numerics.h"
#include "zaya/train/stop_request.h"

namespace zaya {
namespace {

void check_rl_config(const TrainConfig& c, int ranks) {
  const std::string& src = c.source;
  ZAYA_CHECK(c.rl.enabled, "{}: has no [rl] section; `zaya rl` needs one (rl.prompts at least; docs/rl.md)", src);
  ZAYA_CHECK(!c.data.tokenizer.empty(),
             "{}: data.tokenizer is missing; `zaya rl` encodes the prompts and decodes the samples with it", src);
  ZAYA_CHECK(c.phases.empty(), "{}: [[phase]] tables are not allowed with [rl]; allowed: one [train] section", src);
  ZAYA_CHECK(c.parallel.cp == 1,
             "{}: parallel.cp = {}: `zaya rl` samples whole sequences on each rank (context parallelism would split "
             "them); allowed: 1",
             src, c.parallel.cp);
  ZAYA_CHECK(c.parallel.ep == 1 || !c.lora.enabled || !c.lora.quantized_base(),
             "{}: lora.base_dtype = \"{}\" with parallel.ep = {}: the rollout decoder gathers every rank's experts "
             "(docs/rl.md \"Several ranks\") as float values, not as packed rows; allowed: parallel.ep = 1, or "
             "lora.base_dtype = \"float\"",
             src, enum_name<LoraBaseDtype>(kLoraBaseDtypeNames, c.lora.base_dtype), c.parallel.ep);
  ZAYA_CHECK(c.rl.prompts_per_step % ranks == 0,
             "{}: rl.prompts_per_step = {} on {} ranks: each rank samples whole groups of an equal share of the "
             "step's prompts; allowed: a multiple of {}",
             src, c.rl.prompts_per_step, ranks, ranks);
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
  RlRun(TrainConfig config, const RlJobOptions& options, std::shared_ptr<ProcessMesh> mesh);
  RlSummary run();
  // Collective: continues from a checkpoint (rl_checkpoint.h); returns its step.
  int64_t resume_from(const CheckpointReader& ck);
  ProcessMesh& mesh() { return *mesh_; }
  const TrainConfig& config() const { return config_; }

 private:
  double evaluate(int64_t step);
  std::vector<const RlPrompt*> next_prompts();
  RlStepRecord step(int64_t step);
  std::vector<RolloutSample> rollout(const std::vector<const RlPrompt*>& prompts, uint64_t seed, RolloutStats& rs);
  void reference_logprobs();
  const ZayaModel& decoder_weights();
  void save_outputs(RlSummary& s);
  void save_checkpoint(bool async);
  [[noreturn]] void save_at_stop_request();

  TrainConfig config_;
  const RlConfig& rl_;
  RlJobOptions options_;
  Tokenizer tok_;
  std::vector<RlPrompt> prompts_, eval_;
  std::shared_ptr<ProcessMesh> mesh_;
  FaultSeam faults_;
  RunLog log_;  // metrics.jsonl, config.toml, incidents.jsonl
  CheckpointManager checkpoints_;
  StopRequest stop_;
  Heartbeat heartbeat_;
  std::unique_ptr<StepNumerics> numerics_;
  std::unique_ptr<ZayaModel> ref_model_;  // full-parameter KL reference (LoRA: the base itself)
  std::unique_ptr<ZayaModel> full_;       // expert parallelism: every expert, for the decoder (expert_gather.h)
  std::unique_ptr<ModelWorkspace> ref_ws_;
  std::unique_ptr<RolloutBatches> batches_;
  RolloutSettings sampling_;
  Generator rollout_generator_;               // the rollouts' decoder engine, kept from step to step (rl/rollout.h)
  std::optional<StopScreen> rollout_screen_;  // its stop-string screen, likewise
  std::unique_ptr<PromptOrder> order_;
  int64_t step_ = 0;  // steps done
  bool resumed_ = false;
  int64_t optimizer_steps_ = 0;
  std::vector<float> old_, ref_, weights_, logp_;
};

namespace {

TrainConfig prepared(TrainConfig c, int ranks) {
  check_rl_config(c, ranks);
  if (c.run.threads > 0) omp_set_num_threads(c.run.threads);
  const int64_t rows = c.rl.prompts_per_step / ranks * c.rl.group_size;  // this rank's
  c.run.grad_accum = (rows + c.run.micro_batch - 1) / c.run.micro_batch;
  c.schedule.total_steps = c.run.steps * c.rl.updates_per_rollout;  // the schedule counts optimizer steps
  return c;
}

}  // namespace

RlRun::RlRun(TrainConfig config, const RlJobOptions& options, std::shared_ptr<ProcessMesh> mesh)
    : config_(prepared(std::move(config), mesh->world_size())),
      rl_(config_.rl),
      options_(options),
      tok_(Tokenizer::load(config_.data.tokenizer)),
      mesh_(std::move(mesh)),
      faults_(mesh_->rank()),
      log_(config_, mesh_->rank() == 0, true, options.quiet),
      checkpoints_(config_, *mesh_, log_),
      stop_(config_.run.out_dir, *mesh_) {
  faults_.at_startup();
  if (!options_.heartbeat_dir.empty()) {
    heartbeat_ = Heartbeat(options_.heartbeat_dir, mesh_->rank());
    heartbeat_.beat(HeartbeatPhase::kSetup, 0);
  }
  if (config_.vocab_from_tokenizer) {
    config_.model.real_vocab_size = tok_.vocab_size();
    config_.model.vocab_size = (tok_.vocab_size() + 127) / 128 * 128;
  }
  config_.model.validate(config_.source);
  RlPromptRules rules{rl_.reward == RewardKind::kCommand ? "" : rl_.answer_field, rl_.max_new_tokens,
                      config_.run.seq_len};
  prompts_ = read_rl_prompts(rl_.prompts, tok_, rules);
  if (!rl_.eval_prompts.empty()) eval_ = read_rl_prompts(rl_.eval_prompts, tok_, rules);
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
    ref_ws_ = std::make_unique<ModelWorkspace>(config_.model, run.micro_batch, run.seq_len, false,
                                               mesh_->ep_size() > 1 ? &mesh_->ep() : nullptr);
    if (numerics_->lora() == nullptr) {
      // A frozen copy of the starting weights (this rank's experts).
      ZayaModel& m = numerics_->model();
      ref_model_ = std::make_unique<ZayaModel>(config_.model, m.params().experts());
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
  order_ = std::make_unique<PromptOrder>(prompts_.size(), config_.run.seed);
}

std::vector<const RlPrompt*> RlRun::next_prompts() {
  std::vector<const RlPrompt*> out;
  while (int64_t(out.size()) < rl_.prompts_per_step) out.push_back(&prompts_[order_->next()]);
  return out;
}

int64_t RlRun::resume_from(const CheckpointReader& ck) {
  const RlProgress p = read_rl_checkpoint(config_, *numerics_, *order_, ck, !options_.quiet);
  step_ = p.step;
  optimizer_steps_ = p.optimizer_steps;
  checkpoints_.adopt(ck.meta().run_id, step_);
  resumed_ = true;
  return step_;
}

void RlRun::save_checkpoint(bool async) {
  checkpoints_.save(step_, numerics_snapshot(config_, *numerics_, mesh_->rank() == 0),
                    rl_checkpoint_header(config_, *numerics_, *order_, {step_, optimizer_steps_}), async);
}

void RlRun::save_at_stop_request() {
  log_.incident(
      "preempted",
      fmt::format("stop requested at step {}: saving a checkpoint and exiting with code {}", step_, kExitPreempted),
      step_);
  heartbeat_.beat(HeartbeatPhase::kCheckpoint, step_);
  checkpoints_.finish();
  if (checkpoints_.last_saved_step() != step_) save_checkpoint(false);
  throw Preempted();
}

namespace {

// The decoder over the current weights `m` (views of its float32 arena; LoRA: a copy of the adapters).
std::unique_ptr<InferModel> decoder_of(const ZayaModel& m, StepNumerics& n, const TrainConfig& c) {
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

// The weights the decoder reads: the trainer's, or under expert parallelism their copy with every expert
// (expert_gather.h), gathered at every call (the weights, or a LoRA run's balancing biases, change per step).
// Collective over the ep group.
const ZayaModel& RlRun::decoder_weights() {
  if (mesh_->ep_size() == 1) return numerics_->model();
  if (!full_) full_ = full_model_like(numerics_->model());
  gather_experts(numerics_->model(), mesh_->ep(), *full_);
  return *full_;
}

double RlRun::evaluate(int64_t step) {
  // Each rank decodes its contiguous share of the held-out prompts.
  const size_t n = eval_.size(), W = size_t(mesh_->world_size()), rank = size_t(mesh_->rank());
  std::vector<const RlPrompt*> ps;
  for (size_t i = n * rank / W; i < n * (rank + 1) / W; ++i) ps.push_back(&eval_[i]);
  RolloutSettings greedy = sampling_;
  greedy.sampling.temperature = 0;
  const std::unique_ptr<InferModel> im = decoder_of(decoder_weights(), *numerics_, config_);
  std::vector<double> sum = {0.0};
  run_collectively(mesh_->world(), "scoring the held-out prompts", [&] {
    for (double x : rewards_of(rl_, run_rollout(*im, tok_, ps, 1, greedy, 0), 1)) sum[0] += x;
  });
  reduce_over_ranks(mesh_->world(), sum, ReduceOp::kSum);
  const double mean = sum[0] / double(n);
  nlohmann::ordered_json j = {{"step", step}, {"eval_reward", mean}, {"eval_prompts", n}};
  log_.record(j.dump());
  if (!options_.quiet && mesh_->rank() == 0)
    fmt::print("eval step {}: mean reward {:.4f} over {} held-out prompts (greedy)\n", step, mean, n);
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
  if (!rl_.sample_with_trainer) {
    if (!rollout_screen_) rollout_screen_.emplace(tok_, sampling_.stop_strings);
    return run_rollout(*decoder_of(decoder_weights(), *numerics_, config_), tok_, prompts, rl_.group_size, sampling_,
                       seed, &rs, &rollout_generator_, &*rollout_screen_);
  }
  // The trainer's own forward of the step's rows (docs/rl.md "Parity"): its bf16 copy current, dropout off.
  const RunConfig& run = config_.run;
  const RowsForward forward = [&](int64_t, const int32_t* ids) -> const float* {
    numerics_->forward_only(ids, nullptr, run.micro_batch, run.seq_len);
    return numerics_->workspace().logits();
  };
  const TrainerRows rows{run.micro_batch, run.seq_len, run.grad_accum, config_.model.vocab_size,
                         config_.model.real_vocab_size};
  // Under expert parallelism the forward is collective: the ep group runs each one together (trainer_sampler.h).
  MicroBatchAgreement agree;
  if (mesh_->ep_size() > 1)
    agree = [this](std::vector<uint8_t>& busy) {
      mesh_->ep().all_reduce(busy.data(), busy.data(), busy.size(), DType::kU8, ReduceOp::kMax);
    };
  return sample_with_trainer(forward, rows, tok_, prompts, rl_.group_size, sampling_, seed, &rs, agree);
}

RlStepRecord RlRun::step(int64_t step) {
  const RunConfig& run = config_.run;
  const int64_t B = run.micro_batch, S = run.seq_len, G = rl_.group_size;
  const double t0 = now_seconds();
  // This data rank's share of the step's prompts, sampled from the seeds the one-rank run gives them (rl_dist.h).
  const std::vector<const RlPrompt*> step_prompts = next_prompts();
  const RankShare share = rank_share(int64_t(step_prompts.size()), mesh_->rank(), mesh_->world_size());
  const std::vector<const RlPrompt*> prompts(step_prompts.begin() + share.begin, step_prompts.begin() + share.end);
  RolloutStats rs;
  const uint64_t seed = config_.run.seed * 0x9E3779B97F4A7C15ull + uint64_t(step) * uint64_t(step_prompts.size() * G) +
                        uint64_t(share.begin * G);
  const std::vector<RolloutSample> samples = rollout(prompts, seed, rs);
  const double t1 = now_seconds();
  std::vector<double> rewards;
  run_collectively(mesh_->world(), "scoring the samples", [&] { rewards = rewards_of(rl_, samples, G); });
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
  RoutingFlips flips = routing_flips(tws);
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
  // The step's statistics over the ranks (rl_dist.h): sums, minima, maxima.
  double reward_sum = 0, reward_squares = 0, length_sum = 0;
  for (double x : rewards) {
    reward_sum += x;
    reward_squares += x * x;
  }
  for (const RolloutSample& s : samples) length_sum += double(s.tokens.size());
  std::vector<double> sums = {reward_sum,
                              reward_squares,
                              double(rewards.size()),
                              length_sum,
                              first.tokens,
                              first.kl_sum,
                              first.entropy_sum,
                              all.tokens,
                              all.loss_sum,
                              all.clipped,
                              double(mismatched),
                              dec_kl,
                              targets,
                              double(rs.generated_tokens),
                              double(batches_->real_tokens()),
                              double(dec_differ),
                              flips.compared,
                              flips.flips,
                              flips.used,
                              update_flips.compared,
                              update_flips.used,
                              double(rs.prompt_tokens),
                              double(rs.decode_tokens)};
  std::vector<double> mins = {all.ratio_min, dec_rmin},
                      maxs = {all.ratio_max, dec_max, dec_rmax, rs.seconds, rs.decode_seconds};
  reduce_over_ranks(mesh_->world(), sums, ReduceOp::kSum);
  reduce_over_ranks(mesh_->world(), mins, ReduceOp::kMin);
  reduce_over_ranks(mesh_->world(), maxs, ReduceOp::kMax);
  const double mean = sums[0] / sums[2], var = std::max(0.0, sums[1] / sums[2] - mean * mean), len = sums[3] / sums[2];
  first.tokens = sums[4], first.kl_sum = sums[5], first.entropy_sum = sums[6];
  all.tokens = sums[7], all.loss_sum = sums[8], all.clipped = sums[9], mismatched = int64_t(sums[10]);
  dec_kl = sums[11], targets = sums[12], rs.generated_tokens = int64_t(sums[13]);
  const double update_tokens = sums[14];
  dec_differ = int64_t(sums[15]);
  flips.compared = sums[16], flips.flips = sums[17], flips.used = sums[18];
  update_flips.compared = sums[19], update_flips.used = sums[20];
  all.ratio_min = mins[0], dec_rmin = mins[1];
  all.ratio_max = maxs[0], dec_max = maxs[1], dec_rmax = maxs[2], rs.seconds = maxs[3];
  rs.prompt_tokens = int64_t(sums[21]), rs.decode_tokens = int64_t(sums[22]), rs.decode_seconds = maxs[4];
  const double n = std::max(first.tokens, 1.0);
  RlStepRecord out;
  out.reward_mean = mean;
  out.j = {{"step", step},
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
           {"rollout_prompt_tokens", rs.prompt_tokens},
           {"rollout_decode_tokens_per_s", rs.decode_seconds > 0 ? double(rs.decode_tokens) / rs.decode_seconds : 0.0},
           {"update_tokens_per_s", t4 > t3 ? update_tokens * double(rl_.updates_per_rollout) / (t4 - t3) : 0.0},
           {"rollout_seconds", t1 - t0},
           {"reward_seconds", t2 - t1},
           {"score_seconds", t3 - t2},
           {"update_seconds", t4 - t3}};
  log_.record(out.j.dump());
  if (!options_.quiet && mesh_->rank() == 0 && (step == 1 || step % run.log_every == 0 || step == run.steps))
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
  const bool root = mesh_->rank() == 0;
  if (const LoraAdapters* a = numerics_->lora()) {
    s.weights_dir = (out / "adapter").string();
    if (root)
      write_peft_adapter(s.weights_dir, *a, config_.init_from.empty() ? config_.model_preset : config_.init_from);
    return;
  }
  s.weights_dir = (out / "final").string();
  numerics_->gather_master_weights();  // a bf16 ZeRO-1 gather leaves them sharded
  save_final_weights(numerics_->model(), config_.model, *mesh_, s.weights_dir,
                     enum_name<ValueDtype>(kValueDtypeNames, config_.run.save_dtype), config_.run.save_layout);
  if (root)
    std::filesystem::copy_file(config_.data.tokenizer, (std::filesystem::path(s.weights_dir) / "tokenizer.model"),
                               std::filesystem::copy_options::overwrite_existing);
}

RlSummary RlRun::run() {
  RlSummary s;
  const double t0 = now_seconds();
  const int64_t steps = config_.run.steps;
  const int64_t last = options_.stop_at > 0 ? std::min(options_.stop_at, steps) : steps;
  s.first_step = step_;
  s.eval_prompts = int64_t(eval_.size());
  if (resumed_ && step_ >= last) {  // a finished run (or past --stop-at): rewrite nothing
    s.steps = step_;
    s.already_complete = true;
    return s;
  }
  if (!options_.quiet && mesh_->rank() == 0)
    fmt::print("zaya rl: {} prompts ({}), {} per step x {} samples, {} steps, {} held-out prompts; {} GEMMs{}{}\n",
               prompts_.size(), rl_.prompts, rl_.prompts_per_step, rl_.group_size, steps, eval_.size(),
               numerics_->bf16_gemms() ? "bf16" : "f32", numerics_->lora() ? ", LoRA" : "",
               mesh_->world_size() == 1 ? ""
               : mesh_->ep_size() == 1
                   ? fmt::format("; {} data-parallel ranks", mesh_->world_size())
                   : fmt::format("; {} ranks: dp {} x ep {}", mesh_->world_size(), mesh_->dp_size(), mesh_->ep_size()));
  checkpoints_.check_directory(resumed_);
  if (config_.checkpoint.every > 0 || config_.checkpoint.final || last < steps) checkpoints_.open();
  log_.open(resumed_, step_);  // resumed: keeps the records up to the checkpoint's step
  if (!eval_.empty() && !resumed_) {
    heartbeat_.beat(HeartbeatPhase::kEval, 0);
    s.eval_before = evaluate(0);
  }
  stop_.install();
  while (step_ < last) {
    heartbeat_.beat(HeartbeatPhase::kStep, step_ + 1);
    checkpoints_.poll(step_);
    faults_.at_step_start(step_ + 1);
    if (stop_.requested()) save_at_stop_request();
    const RlStepRecord r = step(step_ + 1);
    ++step_;
    if (s.steps == 0) s.first_reward = r.reward_mean;
    s.last_reward = r.reward_mean;
    s.steps = step_;
    if (!eval_.empty() && rl_.eval_every > 0 && step_ % rl_.eval_every == 0 && step_ != steps) {
      heartbeat_.beat(HeartbeatPhase::kEval, step_);
      evaluate(step_);
    }
    if (checkpoints_.open_now() && config_.checkpoint.every > 0 && step_ % config_.checkpoint.every == 0) {
      heartbeat_.beat(HeartbeatPhase::kCheckpoint, step_);
      checkpoints_.guarded(step_, [&] { save_checkpoint(config_.checkpoint.async); });
    }
  }
  heartbeat_.beat(HeartbeatPhase::kFinishing, step_);
  if (checkpoints_.open_now())
    checkpoints_.guarded(step_, [&] {
      checkpoints_.finish();
      if ((config_.checkpoint.final || step_ < steps) && checkpoints_.last_saved_step() != step_)
        save_checkpoint(false);
    });
  s.checkpoint_step = checkpoints_.open_now() ? checkpoints_.safe_step() : -1;
  if (step_ == steps) {  // the run's end (not a --stop-at): the held-out score and the weights
    if (!eval_.empty()) s.eval_after = evaluate(steps);
    save_outputs(s);
  }
  s.seconds = now_seconds() - t0;
  return s;
}

RlSummary run_rl(TrainConfig config, const RlJobOptions& options) {
  // Every rank of an mpirun: the dp x ep mesh (train/job_start.h's start-up checks).
  std::unique_ptr<Comm> world = make_world_comm();
  check_same_on_all_ranks(*world, train_config_to_toml(config), "the RL configuration");
  run_collectively(*world, "building the process mesh",
                   [&] { check_world_fits(world->size(), config.parallel.ep, 1, config.source); });
  auto mesh = std::make_shared<ProcessMesh>(std::move(world), config.parallel.ep, 1);
  if (mesh->world_size() > 1)
    for (Comm* c : {&mesh->world(), &mesh->ep(), &mesh->dp(), &mesh->cp()})
      c->set_timeout(config.parallel.comm_timeout);
  std::unique_ptr<RlRun> run;
  run_collectively(mesh->world(), "start-up", [&] { run = std::make_unique<RlRun>(std::move(config), options, mesh); });
  RlRun& job = *run;
  if (!options.resume.empty()) {
    const ResumeReport r = resume_from_checkpoints(job.mesh().world(), job.config().checkpoint_dir(), options.resume,
                                                   [&](const CheckpointReader& ck) { return job.resume_from(ck); });
    if (job.mesh().rank() == 0) {
      for (const std::string& d : r.damaged) fmt::print(stderr, "warning: skipped a damaged checkpoint: {}\n", d);
      for (const std::string& m : r.moved) fmt::print(stderr, "note: moved {} aside\n", m);
      fmt::print("resumed from {}\n", r.dir);
    }
  }
  return job.run();
}

}  // namespace zaya
