#include "zaya/train/train_config.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include "zaya/core/error.h"
#include "zaya/core/suggest.h"
#include "zaya/io/toml_section.h"
#include "zaya/model/config_toml.h"
#include "zaya/model/native_config.h"
#include "zaya/model/recompute.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/train/recipe_config.h"

namespace zaya {
namespace {

const std::vector<std::string> kDataKeys = {"dir", "tokenizer", "train", "val", "document_masking"};
const std::vector<std::string> kTrainKeys = {"seed",       "micro_batch",  "seq_len",   "grad_accum", "steps",
                                             "eval_every", "eval_batches", "log_every", "threads",    "out_dir",
                                             "save_dtype", "save_layout",  "precision", "recompute",  "loss_chunk"};
const std::vector<std::string> kOptimKeys = {"lr",           "beta1",    "beta2",         "eps",
                                             "weight_decay", "muon",     "muon_momentum", "muon_nesterov",
                                             "ns_steps",     "ns_dtype", "grad_clip"};
const std::vector<std::string> kScheduleKeys = {"kind", "warmup_steps", "min_lr_ratio", "decay_fraction"};
const std::vector<std::string> kMoeKeys = {"balance",     "balance_lr",       "balance_beta1", "balance_beta2",
                                           "skip_target", "switch_aux_coeff", "z_loss_coeff"};
const std::vector<std::string> kParallelKeys = {"ep", "cp", "comm_timeout", "zero_gather_dtype"};
const std::vector<std::string> kCheckpointKeys = {"every", "final", "keep_last", "keep_every", "async", "dir"};
const std::vector<std::string> kFtKeys = {"spike_z",       "spike_warmup",     "rollback_after",  "max_rollbacks",
                                          "on_save_error", "max_failed_saves", "straggler_ratio", "skip_steps"};
const std::vector<std::string> kLoraKeys = {"rank", "alpha", "dropout", "targets", "train_biases"};
const std::vector<std::string> kSections = {"model",    "data",       "train", "optim", "schedule", "moe",
                                            "parallel", "checkpoint", "ft",    "lora",  "phase"};

// [lora]: present means a LoRA run (model/lora.h).
LoraConfig parse_lora(const toml::table* table, const std::string& source) {
  LoraConfig l;
  if (table == nullptr) return l;
  TomlSection s(table, "lora", source);
  l.enabled = true;
  l.rank = s.get_int("rank", l.rank, 1, 4096);
  l.alpha = s.get_double("alpha", l.alpha, 0.0, 1e6, true);
  l.dropout = s.get_double("dropout", l.dropout, 0.0, 0.99);
  std::vector<std::string> defaults, allowed, names;
  for (LoraTarget t : l.targets) defaults.emplace_back(lora_target_name(t));
  for (LoraTarget t : all_lora_targets()) allowed.emplace_back(lora_target_name(t));
  names = s.get_string_list("targets", defaults, allowed);
  l.targets.clear();
  for (const std::string& n : names) l.targets.push_back(parse_lora_target(n, source));
  // PEFT's ParamWrapper, which applies an adapter to a stacked expert parameter, has no dropout.
  if (l.has_expert_targets() && l.dropout > 0)
    s.forbid("dropout",
             "dropout must be 0 with expert targets (mlp.experts.*): PEFT applies those with its ParamWrapper, which "
             "has no lora_dropout");
  l.train_biases = s.get_bool("train_biases", l.train_biases);
  s.finish(kLoraKeys);
  return l;
}

const toml::table* table_of(const toml::table& root, const char* name, const std::string& source) {
  const toml::node* n = root.get(name);
  if (n == nullptr) return nullptr;
  if (!n->is_table()) fail("{}: '{}' must be a table ([{}])", source, name, name);
  return n->as_table();
}

// " (did you mean 'x'?); allowed: ..." for a misspelt name, the list alone when no name is close.
std::string name_hint(const std::string& word, const std::vector<std::string>& names) {
  const std::optional<std::string> guess = closest_name(word, names);
  return fmt::format("{}; allowed: {}", guess ? fmt::format(" (did you mean '{}'?)", *guess) : "",
                     fmt::join(names, ", "));
}

// `--set section.key=value`: a mistake in it is the command line's (UsageError).
void apply_override(toml::table& root, const std::string& assignment, const std::string& source) {
  if (assignment.rfind("phase.", 0) == 0) return apply_phase_override(root, assignment);
  const size_t eq = assignment.find('=');
  const size_t dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    fail_usage("--set {} is invalid; expected section.key=value, e.g. train.steps=100", assignment);
  const std::string section = assignment.substr(0, dot), key = assignment.substr(dot + 1, eq - dot - 1);
  if (std::find(kSections.begin(), kSections.end(), section) == kSections.end())
    fail_usage("--set {}: unknown section '{}'{}", assignment, section, name_hint(section, kSections));
  if (!root.contains(section)) root.insert(section, toml::table{});
  toml::table* table = root[section].as_table();
  if (table == nullptr) fail("{}: '{}' must be a table ([{}])", source, section, section);
  insert_override(*table, key, assignment.substr(eq + 1), assignment);
}

TrainConfig build(const toml::table& root, const std::string& source) {
  for (auto&& [k, v] : root) {
    const std::string section(k.str());
    if (std::find(kSections.begin(), kSections.end(), section) == kSections.end())
      fail("{}: unknown section '{}'{}", source, section, name_hint(section, kSections));
  }
  TrainConfig t;
  t.source = source;
  // [model]: a preset, then explicit overrides of any size (model/config_toml.h).
  const ModelTable model = parse_model_table(table_of(root, "model", source), source);
  t.model_preset = model.preset;
  t.model = model.config;
  t.vocab_from_tokenizer = model.vocab_from_tokenizer;
  t.init_from = model.init_from;
  ZayaConfig& c = t.model;

  // A recipe ([[phase]] tables, recipe.h): the phases own the data, the
  // sequence length, the step count and the schedule.
  const bool recipe = root.contains("phase");
  const std::string recipe_why = "the config has [[phase]] tables, and with phases ";
  TomlSection d(table_of(root, "data", source), "data", source);
  if (recipe) d.forbid("dir", recipe_why + "each phase names its datasets in [[phase.data]] tables");
  if (recipe) d.forbid("train", recipe_why + "each phase names its datasets in [[phase.data]] tables");
  if (recipe) d.forbid("val", recipe_why + "each phase names its datasets in [[phase.data]] tables");
  t.data.dir = d.get_string("dir", "");
  t.data.tokenizer = d.get_string("tokenizer", "");
  t.data.train = d.get_string("train", "");
  t.data.val = d.get_string("val", "");
  t.data.document_masking = d.get_bool("document_masking", false);
  d.finish(kDataKeys);
  ZAYA_CHECK(recipe || !t.data.dir.empty() || !t.data.train.empty(),
             "{}: data.dir is missing; set it to a directory made by `zaya data shards`, or set data.train and "
             "data.val to dataset prefixes (zaya shards or Megatron .bin/.idx pairs)",
             source);
  ZAYA_CHECK(recipe || !t.data.dir.empty() || !t.data.val.empty(),
             "{}: data.val is missing; with data.train and no data.dir, set it to the validation dataset's prefix "
             "(PREFIX.bin + PREFIX.idx)",
             source);

  TomlSection r(table_of(root, "train", source), "train", source);
  RunConfig& run = t.run;
  run.seed = uint64_t(r.get_int("seed", int64_t(run.seed), 0, INT64_MAX));
  run.micro_batch = r.get_int("micro_batch", run.micro_batch, 1, 1 << 16);
  if (recipe) {
    r.forbid("seq_len", recipe_why + "each phase sets its seq_len");
    r.forbid("steps", recipe_why +
                          "the steps come from each phase's token budget: ceil(tokens / (micro_batch x "
                          "seq_len x grad_accum x data replicas)); use --stop-at to stop early");
  }
  run.seq_len = r.get_int("seq_len", run.seq_len, 1, 1 << 20);
  run.grad_accum = r.get_int("grad_accum", run.grad_accum, 1, 1 << 16);
  run.steps = r.get_int("steps", run.steps, 1, int64_t(1) << 40);
  run.eval_every = r.get_int("eval_every", run.eval_every, 0, int64_t(1) << 40);
  run.eval_batches = r.get_int("eval_batches", run.eval_batches, 1, 1 << 20);
  run.log_every = r.get_int("log_every", run.log_every, 1, int64_t(1) << 40);
  run.threads = int(r.get_int("threads", run.threads, 0, 4096));
  run.out_dir = r.get_string("out_dir", run.out_dir);
  run.save_dtype = r.get_string("save_dtype", run.save_dtype, {"f32", "bf16"});
  run.precision = r.get_string("precision", run.precision, {"f32", "bf16", "auto"});
  run.recompute = r.get_string("recompute", run.recompute, recompute_names());
  run.loss_chunk = r.get_int("loss_chunk", run.loss_chunk, 0, int64_t(1) << 40);
  run.save_layout = r.get_string("save_layout", run.save_layout, {"legacy", "native"});
  r.finish(kTrainKeys);
  if (const std::string why = native_layout_problem(c); run.save_layout == "native" && !why.empty())
    fail("{}: train.save_layout = \"native\" is invalid for this model: {}; allowed: \"legacy\"", source, why);
  ZAYA_CHECK(recipe || run.seq_len <= c.max_position,
             "{}: train.seq_len = {} is invalid; allowed: <= model max_position_embeddings ({})", source, run.seq_len,
             c.max_position);

  TomlSection o(table_of(root, "optim", source), "optim", source);
  OptimizerConfig& op = t.optim;
  op.lr = o.get_double("lr", op.lr, 1e-9, 1.0);
  op.beta1 = o.get_double("beta1", op.beta1, 0.0, 0.999999);
  op.beta2 = o.get_double("beta2", op.beta2, 0.0, 0.999999);
  op.eps = o.get_double("eps", op.eps, 1e-30, 1.0);
  op.weight_decay = o.get_double("weight_decay", op.weight_decay, 0.0, 10.0);
  op.use_muon = o.get_bool("muon", op.use_muon);
  op.muon_momentum = o.get_double("muon_momentum", op.muon_momentum, 0.0, 0.999999);
  op.muon_nesterov = o.get_bool("muon_nesterov", op.muon_nesterov);
  op.ns_steps = int(o.get_int("ns_steps", op.ns_steps, 1, 20));
  op.ns_dtype = o.get_string("ns_dtype", op.ns_dtype, {"auto", "bf16", "f32"});
  op.grad_clip = o.get_double("grad_clip", op.grad_clip, 0.0, 1e9);
  o.finish(kOptimKeys);
  op.validate(source);

  if (recipe) {
    PhaseDefaults pd;
    pd.micro_batch = run.micro_batch;
    pd.lr = op.lr;
    pd.rope_theta = c.rope_theta;
    pd.sliding_rope_theta = c.sliding_rope_theta;
    pd.sliding = c.has_sliding();
    pd.max_position = c.max_position;
    pd.cp = int(std::max<int64_t>(1, root["parallel"]["cp"].value_or<int64_t>(1)));  // validated with [parallel]
    pd.ep = int(std::max<int64_t>(1, root["parallel"]["ep"].value_or<int64_t>(1)));
    t.phases = parse_phases(root, source, pd);
    // The first phase's shape; the trainer moves from phase to phase and sets
    // model.rope_theta to each phase's (so a checkpoint's config carries the
    // RoPE base its weights were trained with last).
    run.micro_batch = t.phases[0].micro_batch;
    run.seq_len = t.phases[0].seq_len;
    // Nominal steps, for the smallest world every phase fits (ep x the cp
    // sizes' least common multiple); the trainer plans for its own world.
    int64_t world = 1;
    for (const PhaseConfig& p : t.phases) world = std::lcm(world, int64_t(p.cp));
    t.parallel.ep = pd.ep;
    run.steps = 0;
    for (const PhasePlan& p : plan_phases(t, world * pd.ep)) run.steps += p.steps;
  }

  TomlSection s(table_of(root, "schedule", source), "schedule", source);
  if (recipe)
    for (const std::string& k : kScheduleKeys)
      s.forbid(k.c_str(), recipe_why +
                              "the learning-rate schedule is WSD within each phase (phase keys lr, "
                              "warmup_steps, decay_fraction, min_lr_ratio)");
  ScheduleConfig& sc = t.schedule;
  sc.kind = s.get_string("kind", sc.kind, {"cosine", "wsd", "constant"});
  sc.warmup_steps = s.get_int("warmup_steps", std::min<int64_t>(100, run.steps / 10), 0, run.steps);
  sc.min_lr_ratio = s.get_double("min_lr_ratio", sc.min_lr_ratio, 0.0, 1.0);
  sc.decay_fraction = s.get_double("decay_fraction", sc.decay_fraction, 1e-9, 1.0);
  sc.total_steps = run.steps;
  s.finish(kScheduleKeys);
  sc.validate(source);

  TomlSection e(table_of(root, "moe", source), "moe", source);
  BalanceConfig& b = t.balance;
  b.enabled = e.get_bool("balance", b.enabled);
  b.lr = e.get_double("balance_lr", b.lr, 0.0, 0.999);
  b.beta1 = e.get_double("balance_beta1", b.beta1, 0.0, 0.999999);
  b.beta2 = e.get_double("balance_beta2", b.beta2, 0.0, 0.999999);
  b.skip_target = e.get_double("skip_target", b.skip_target, 0.0, 0.999);
  t.router_losses.switch_aux_coeff = float(e.get_double("switch_aux_coeff", 0.0, 0.0, 100.0));
  t.router_losses.z_loss_coeff = float(e.get_double("z_loss_coeff", 0.0, 0.0, 100.0));
  e.finish(kMoeKeys);
  b.validate(source);

  TomlSection par(table_of(root, "parallel", source), "parallel", source);
  t.parallel.ep = int(par.get_int("ep", t.parallel.ep, 1, 4096));
  t.parallel.cp = int(par.get_int("cp", t.parallel.cp, 1, 4096));
  t.parallel.comm_timeout = par.get_double("comm_timeout", t.parallel.comm_timeout, 0.0, 1e7);
  t.parallel.zero_gather_dtype = par.get_string("zero_gather_dtype", t.parallel.zero_gather_dtype, {"f32", "bf16"});
  par.finish(kParallelKeys);
  TomlSection ck(table_of(root, "checkpoint", source), "checkpoint", source);
  CheckpointConfig& cc = t.checkpoint;
  cc.every = ck.get_int("every", cc.every, 0, int64_t(1) << 40);
  cc.final = ck.get_bool("final", cc.final);
  cc.keep_last = int(ck.get_int("keep_last", cc.keep_last, 1, 1 << 20));
  cc.keep_every = ck.get_int("keep_every", cc.keep_every, 0, int64_t(1) << 40);
  cc.async = ck.get_bool("async", cc.async);
  cc.dir = ck.get_string("dir", cc.dir);
  ck.finish(kCheckpointKeys);
  TomlSection f(table_of(root, "ft", source), "ft", source);
  FaultToleranceConfig& ft = t.ft;
  ft.spike_z = f.get_double("spike_z", ft.spike_z, 0.0, 1e6);
  ft.spike_warmup = int(f.get_int("spike_warmup", ft.spike_warmup, 2, 128));
  ft.rollback_after = int(f.get_int("rollback_after", ft.rollback_after, 0, 1 << 20));
  ft.max_rollbacks = int(f.get_int("max_rollbacks", ft.max_rollbacks, 1, 1 << 20));
  ft.on_save_error = f.get_string("on_save_error", ft.on_save_error, {"continue", "stop"});
  ft.max_failed_saves = int(f.get_int("max_failed_saves", ft.max_failed_saves, 0, 1 << 20));
  ft.straggler_ratio = f.get_double("straggler_ratio", ft.straggler_ratio, 1.0, 1e6);
  ft.skip_steps = f.get_int_list("skip_steps", ft.skip_steps, 1, int64_t(1) << 40);
  f.finish(kFtKeys);
  t.lora = parse_lora(table_of(root, "lora", source), source);
  ZAYA_CHECK(c.experts % t.parallel.ep == 0,
             "{}: parallel.ep = {} is invalid; allowed: a divisor of the expert count ({})", source, t.parallel.ep,
             c.experts);
  const int64_t cp_unit = 4 * int64_t(t.parallel.cp);  // 2 cp chunks of at least 2 tokens (model/context_parallel.h)
  ZAYA_CHECK(t.parallel.cp == 1 || (t.run.seq_len % (2 * t.parallel.cp) == 0 && t.run.seq_len >= cp_unit),
             "{}: train.seq_len = {} does not fit parallel.cp = {}; allowed: a multiple of 2 * cp = {} and at least "
             "{} (every rank holds two chunks of at least 2 tokens of each sequence)",
             source, t.run.seq_len, t.parallel.cp, 2 * t.parallel.cp, cp_unit);
  ZAYA_CHECK(t.parallel.zero_gather_dtype == "f32" || t.run.precision != "f32",
             "{}: parallel.zero_gather_dtype = \"bf16\" needs bf16 GEMMs; allowed with train.precision = \"f32\": "
             "\"f32\" (or set train.precision = \"bf16\" or \"auto\")",
             source);

  c.validate(source);
  return t;
}

}  // namespace

bool uses_bf16_gemms(const RunConfig& run) {
  return run.precision == "bf16" || (run.precision == "auto" && bf16_gemm_outruns_f32());
}

std::string TrainConfig::checkpoint_dir() const {
  return checkpoint.dir.empty() ? (std::filesystem::path(run.out_dir) / "checkpoints").string() : checkpoint.dir;
}

TrainConfig parse_train_config(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    fail("{}:{}:{}: TOML syntax error: {}", source, err.source().begin.line, err.source().begin.column,
         err.description());
  }
  for (const std::string& o : overrides) apply_override(root, o, source);
  return build(root, source);
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot read config file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_train_config(ss.str(), path, overrides);
}

std::string train_config_to_toml(const TrainConfig& t) {
  std::string s = model_table_to_toml(t.model_preset, t.model, t.init_from);
  // A recipe's phases own data.dir, train.seq_len, train.steps and [schedule] (written with the phases).
  const bool recipe = !t.phases.empty();
  if (recipe)
    s +=
        fmt::format("[data]\ntokenizer = \"{}\"\ndocument_masking = {}\n\n", t.data.tokenizer, t.data.document_masking);
  else
    s += fmt::format("[data]\ndir = \"{}\"\ntokenizer = \"{}\"\n{}{}document_masking = {}\n\n", t.data.dir,
                     t.data.tokenizer, t.data.train.empty() ? "" : fmt::format("train = \"{}\"\n", t.data.train),
                     t.data.val.empty() ? "" : fmt::format("val = \"{}\"\n", t.data.val), t.data.document_masking);
  const RunConfig& r = t.run;
  if (recipe)
    s += fmt::format("[train]\nseed = {}\nmicro_batch = {}\ngrad_accum = {}\n", r.seed, r.micro_batch, r.grad_accum);
  else
    s += fmt::format("[train]\nseed = {}\nmicro_batch = {}\nseq_len = {}\ngrad_accum = {}\nsteps = {}\n", r.seed,
                     r.micro_batch, r.seq_len, r.grad_accum, r.steps);
  s += fmt::format("eval_every = {}\neval_batches = {}\nlog_every = {}\nthreads = {}\nout_dir = \"{}\"\n", r.eval_every,
                   r.eval_batches, r.log_every, r.threads, r.out_dir);
  s += fmt::format(
      "save_dtype = \"{}\"\nsave_layout = \"{}\"\nprecision = \"{}\"\nrecompute = \"{}\"\nloss_chunk = {}\n\n",
      r.save_dtype, r.save_layout, r.precision, r.recompute, r.loss_chunk);
  const OptimizerConfig& o = t.optim;
  s += fmt::format("[optim]\nlr = {}\nbeta1 = {}\nbeta2 = {}\neps = {}\nweight_decay = {}\nmuon = {}\n", o.lr, o.beta1,
                   o.beta2, o.eps, o.weight_decay, o.use_muon);
  s += fmt::format("muon_momentum = {}\nmuon_nesterov = {}\nns_steps = {}\nns_dtype = \"{}\"\ngrad_clip = {}\n\n",
                   o.muon_momentum, o.muon_nesterov, o.ns_steps, o.ns_dtype, o.grad_clip);
  const ScheduleConfig& sc = t.schedule;
  if (!recipe)
    s += fmt::format("[schedule]\nkind = \"{}\"\nwarmup_steps = {}\nmin_lr_ratio = {}\ndecay_fraction = {}\n\n",
                     sc.kind, sc.warmup_steps, sc.min_lr_ratio, sc.decay_fraction);
  const BalanceConfig& b = t.balance;
  s += fmt::format("[moe]\nbalance = {}\nbalance_lr = {}\nbalance_beta1 = {}\nbalance_beta2 = {}\n", b.enabled, b.lr,
                   b.beta1, b.beta2);
  s += fmt::format("skip_target = {}\nswitch_aux_coeff = {}\nz_loss_coeff = {}\n\n", b.skip_target,
                   t.router_losses.switch_aux_coeff, t.router_losses.z_loss_coeff);
  s += fmt::format("[parallel]\nep = {}\ncp = {}\ncomm_timeout = {}\nzero_gather_dtype = \"{}\"\n\n", t.parallel.ep,
                   t.parallel.cp, t.parallel.comm_timeout, t.parallel.zero_gather_dtype);
  const CheckpointConfig& cc = t.checkpoint;
  s +=
      fmt::format("[checkpoint]\nevery = {}\nfinal = {}\nkeep_last = {}\nkeep_every = {}\nasync = {}\ndir = \"{}\"\n\n",
                  cc.every, cc.final, cc.keep_last, cc.keep_every, cc.async, cc.dir);
  const FaultToleranceConfig& ft = t.ft;
  s += fmt::format("[ft]\nspike_z = {}\nspike_warmup = {}\nrollback_after = {}\nmax_rollbacks = {}\n", ft.spike_z,
                   ft.spike_warmup, ft.rollback_after, ft.max_rollbacks);
  s += fmt::format("on_save_error = \"{}\"\nmax_failed_saves = {}\n", ft.on_save_error, ft.max_failed_saves);
  s += fmt::format("straggler_ratio = {}\nskip_steps = [{}]\n", ft.straggler_ratio, fmt::join(ft.skip_steps, ", "));
  if (t.lora.enabled) {
    std::vector<std::string> targets;
    for (LoraTarget x : t.lora.targets) targets.push_back(fmt::format("\"{}\"", lora_target_name(x)));
    s += fmt::format("\n[lora]\nrank = {}\nalpha = {}\ndropout = {}\ntargets = [{}]\ntrain_biases = {}\n", t.lora.rank,
                     t.lora.alpha, t.lora.dropout, fmt::join(targets, ", "), t.lora.train_biases);
  }
  s += phases_to_toml(t.phases, t.model.has_sliding());
  return s;
}

}  // namespace zaya
