#include "zaya/train/train_fields.h"

#include "zaya/model/recompute.h"

namespace zaya {
namespace {

// The member a row sets, as a pointer into the config being read or written.
#define ZAYA_MEMBER(expr) [](TrainConfig& t) -> TrainMember { return &t.expr; }

constexpr double k2e16 = double(1 << 16), k2e20 = double(1 << 20), k2e40 = double(int64_t(1) << 40);
constexpr const char* kDataWhy =
    "the config has [[phase]] tables, and with phases each phase names its datasets in [[phase.data]] tables";
constexpr const char* kSeqLenWhy = "the config has [[phase]] tables, and with phases each phase sets its seq_len";
constexpr const char* kStepsWhy =
    "the config has [[phase]] tables, and with phases the steps come from each phase's token budget: ceil(tokens / "
    "(micro_batch x seq_len x grad_accum x data replicas)); use --stop-at to stop early";
constexpr const char* kScheduleWhy =
    "the config has [[phase]] tables, and with phases the learning-rate schedule is WSD within each phase (phase "
    "keys lr, warmup_steps, decay_fraction, min_lr_ratio)";
constexpr RecipeRule kPhase = RecipeRule::kPhaseOwns;

const std::vector<TrainField>& fields() {
  static const std::vector<TrainField> f = {
      // [data] (docs/training.md)
      {"data", "dir", ZAYA_MEMBER(data.dir), 0, 0, {}, kPhase, kDataWhy},
      {"data", "tokenizer", ZAYA_MEMBER(data.tokenizer)},
      {"data", "train", ZAYA_MEMBER(data.train), 0, 0, {}, kPhase, kDataWhy, true},
      {"data", "val", ZAYA_MEMBER(data.val), 0, 0, {}, kPhase, kDataWhy, true},
      {"data", "document_masking", ZAYA_MEMBER(data.document_masking)},
      // [train]
      {"train", "seed", ZAYA_MEMBER(run.seed), 0, double(INT64_MAX)},
      {"train", "micro_batch", ZAYA_MEMBER(run.micro_batch), 1, k2e16},
      {"train", "seq_len", ZAYA_MEMBER(run.seq_len), 1, k2e20, {}, kPhase, kSeqLenWhy},
      {"train", "grad_accum", ZAYA_MEMBER(run.grad_accum), 1, k2e16},
      {"train", "steps", ZAYA_MEMBER(run.steps), 1, k2e40, {}, kPhase, kStepsWhy},
      {"train", "eval_every", ZAYA_MEMBER(run.eval_every), 0, k2e40},
      {"train", "eval_batches", ZAYA_MEMBER(run.eval_batches), 1, k2e20},
      {"train", "log_every", ZAYA_MEMBER(run.log_every), 1, k2e40},
      {"train", "threads", ZAYA_MEMBER(run.threads), 0, 4096},
      {"train", "out_dir", ZAYA_MEMBER(run.out_dir)},
      {"train", "save_dtype", ZAYA_MEMBER(run.save_dtype), 0, 0, {"f32", "bf16"}},
      {"train", "save_layout", ZAYA_MEMBER(run.save_layout)},
      {"train", "precision", ZAYA_MEMBER(run.precision)},
      {"train", "recompute", ZAYA_MEMBER(run.recompute), 0, 0, recompute_names()},
      {"train", "loss_chunk", ZAYA_MEMBER(run.loss_chunk), 0, k2e40},
      // [optim]
      {"optim", "lr", ZAYA_MEMBER(optim.lr), 1e-9, 1.0},
      {"optim", "beta1", ZAYA_MEMBER(optim.beta1), 0.0, 0.999999},
      {"optim", "beta2", ZAYA_MEMBER(optim.beta2), 0.0, 0.999999},
      {"optim", "eps", ZAYA_MEMBER(optim.eps), 1e-30, 1.0},
      {"optim", "weight_decay", ZAYA_MEMBER(optim.weight_decay), 0.0, 10.0},
      {"optim", "muon", ZAYA_MEMBER(optim.use_muon)},
      {"optim", "muon_momentum", ZAYA_MEMBER(optim.muon_momentum), 0.0, 0.999999},
      {"optim", "muon_nesterov", ZAYA_MEMBER(optim.muon_nesterov)},
      {"optim", "ns_steps", ZAYA_MEMBER(optim.ns_steps), 1, 20},
      {"optim", "ns_dtype", ZAYA_MEMBER(optim.ns_dtype), 0, 0, {"auto", "bf16", "f32"}},
      {"optim", "grad_clip", ZAYA_MEMBER(optim.grad_clip), 0.0, 1e9},
      // [schedule]; warmup_steps's default and range follow train.steps (read in train_config.cc)
      {"schedule", "kind", ZAYA_MEMBER(schedule.kind), 0, 0, {"cosine", "wsd", "constant"}, kPhase, kScheduleWhy},
      {"schedule", "warmup_steps", ZAYA_MEMBER(schedule.warmup_steps), 0, 0, {}, kPhase, kScheduleWhy},
      {"schedule", "min_lr_ratio", ZAYA_MEMBER(schedule.min_lr_ratio), 0.0, 1.0, {}, kPhase, kScheduleWhy},
      {"schedule", "decay_fraction", ZAYA_MEMBER(schedule.decay_fraction), 1e-9, 1.0, {}, kPhase, kScheduleWhy},
      // [moe]
      {"moe", "balance", ZAYA_MEMBER(balance.enabled)},
      {"moe", "balance_lr", ZAYA_MEMBER(balance.lr), 0.0, 0.999},
      {"moe", "balance_beta1", ZAYA_MEMBER(balance.beta1), 0.0, 0.999999},
      {"moe", "balance_beta2", ZAYA_MEMBER(balance.beta2), 0.0, 0.999999},
      {"moe", "skip_target", ZAYA_MEMBER(balance.skip_target), 0.0, 0.999},
      {"moe", "switch_aux_coeff", ZAYA_MEMBER(router_losses.switch_aux_coeff), 0.0, 100.0},
      {"moe", "z_loss_coeff", ZAYA_MEMBER(router_losses.z_loss_coeff), 0.0, 100.0},
      // [parallel]
      {"parallel", "ep", ZAYA_MEMBER(parallel.ep), 1, 4096},
      {"parallel", "cp", ZAYA_MEMBER(parallel.cp), 1, 4096},
      {"parallel", "comm_timeout", ZAYA_MEMBER(parallel.comm_timeout), 0.0, 1e7},
      {"parallel", "zero_gather_dtype", ZAYA_MEMBER(parallel.zero_gather_dtype), 0, 0, {"f32", "bf16"}},
      // [checkpoint] (docs/checkpoints.md)
      {"checkpoint", "every", ZAYA_MEMBER(checkpoint.every), 0, k2e40},
      {"checkpoint", "final", ZAYA_MEMBER(checkpoint.final)},
      {"checkpoint", "keep_last", ZAYA_MEMBER(checkpoint.keep_last), 1, k2e20},
      {"checkpoint", "keep_every", ZAYA_MEMBER(checkpoint.keep_every), 0, k2e40},
      {"checkpoint", "async", ZAYA_MEMBER(checkpoint.async)},
      {"checkpoint", "dir", ZAYA_MEMBER(checkpoint.dir)},
      // [ft] (docs/fault-tolerance.md)
      {"ft", "spike_z", ZAYA_MEMBER(ft.spike_z), 0.0, 1e6},
      {"ft", "spike_warmup", ZAYA_MEMBER(ft.spike_warmup), 2, 128},
      {"ft", "rollback_after", ZAYA_MEMBER(ft.rollback_after), 0, k2e20},
      {"ft", "max_rollbacks", ZAYA_MEMBER(ft.max_rollbacks), 1, k2e20},
      {"ft", "on_save_error", ZAYA_MEMBER(ft.on_save_error)},
      {"ft", "max_failed_saves", ZAYA_MEMBER(ft.max_failed_saves), 0, k2e20},
      {"ft", "straggler_ratio", ZAYA_MEMBER(ft.straggler_ratio), 1.0, 1e6},
      {"ft", "skip_steps", ZAYA_MEMBER(ft.skip_steps), 1, k2e40},
  };
  return f;
}

#undef ZAYA_MEMBER

}  // namespace

std::span<const TrainField> train_fields() { return fields(); }

std::vector<std::string> train_section_keys(const std::string& section) {
  std::vector<std::string> keys;
  for (const TrainField& f : fields())
    if (section == f.section) keys.push_back(f.key);
  return keys;
}

}  // namespace zaya
