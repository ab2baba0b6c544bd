// zaya ckpt inspect | verify | reshape | export | import | random: checkpoint tools (docs/checkpoints.md).
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "zaya/ckpt/reader.h"
#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/formats/random_checkpoint.h"
#include "zaya/io/atomic_file.h"
#include "zaya/train/checkpoint_tools.h"
#include "zaya/train/model_export.h"

namespace zaya::cli {
namespace {

// Which checkpoint of a checkpoints root was used, and the damaged ones passed over (stderr).
void say_source(const ModelSource& s) {
  for (const std::string& why : s.skipped) fmt::print(stderr, "zaya ckpt: skipped a damaged checkpoint: {}\n", why);
  if (!s.root.empty())
    fmt::print("{}: using {}, its newest checkpoint that reads completely{}\n", s.root, s.dir,
               s.skipped.empty() ? "" : fmt::format(" ({} newer one(s) skipped)", s.skipped.size()));
}

// A model directory (config.json + safetensors): layout, config, files, tensors.
void inspect_model_directory(const std::string& dir, bool tensors, const std::string& json_out) {
  const ModelDirectoryInfo info = describe_model_directory(dir);
  const ZayaConfig& c = info.config;
  fmt::print("{}\n  model directory, {} layout: weights only (no step, optimizer or data state)\n", dir,
             info.native ? "native" : "legacy");
  fmt::print("  model: hidden {}, {} blocks, {} experts (top-{}), vocab {}\n", c.hidden, c.num_blocks, c.experts,
             c.top_k, c.vocab_size);
  fmt::print("  {} tensors in {} files, {:.1f} MB ({}); tokenizer: {}\n", info.tensors.size(), info.files.size(),
             double(info.bytes()) / 1e6, fmt::join(info.dtypes, ", "),
             info.tokenizer.empty() ? "none" : info.tokenizer);
  for (const ModelDirectoryInfo::File& f : info.files) fmt::print("    {:<32} {:>14} bytes\n", f.name, f.bytes);
  if (tensors)
    for (const ModelDirectoryInfo::Tensor& t : info.tensors)
      fmt::print("    {:<72} {} [{}], file {}\n", t.name, t.dtype, fmt::join(t.shape, ", "), t.file);
  if (!json_out.empty()) write_file_atomic(json_out, info.to_json().dump(1) + "\n");
}

void inspect(const std::string& in, bool tensors, const std::string& json_out) {
  const ModelSource source = resolve_model_source(in);
  say_source(source);
  if (source.kind == ModelSource::Kind::kModelDirectory) return inspect_model_directory(source.dir, tensors, json_out);
  const std::string& dir = source.dir;
  CheckpointReader ck = CheckpointReader::open(dir);
  const CheckpointMeta& m = ck.meta();
  const TrainConfig config = checkpoint_train_config(ck);
  uint64_t bytes = 0;
  for (const CkptFile& f : m.files) bytes += f.bytes;
  fmt::print("{}\n  run {}, step {}, written by {} rank(s) (dp {} x ep {}{})\n", dir, m.run_id, m.step, m.world, m.dp,
             m.ep, m.cp > 1 ? fmt::format(" x cp {}", m.cp) : "");
  fmt::print("  model: {} preset, hidden {}, {} blocks, {} experts (top-{}), vocab {}\n", config.model_preset,
             config.model.hidden, config.model.num_blocks, config.model.experts, config.model.top_k,
             config.model.vocab_size);
  fmt::print("  {} tensors in {} files, {:.1f} MB; optimizer state: {}\n", m.tensors.size(), m.files.size(),
             double(bytes) / 1e6, m.state.value("optimizer_state", false) ? "yes" : "no");
  if (m.state.contains("data")) fmt::print("  data position: {}\n", m.state["data"].dump());
  if (m.state.contains("recipe"))  // a multi-phase run (docs/context-extension.md)
    fmt::print("  recipe phase {} '{}' (began after step {}){}\n", m.state["recipe"].value("phase", 0),
               m.state["recipe"].value("name", ""), m.state["recipe"].value("phase_start", int64_t(0)),
               m.state["recipe"].contains("mixture") ? ", mixture: " + m.state["recipe"]["mixture"].dump() : "");
  for (const CkptFile& f : m.files) fmt::print("    {:<32} {:>14} bytes\n", f.name, f.bytes);
  if (tensors)
    for (const auto& [name, t] : m.tensors)
      fmt::print("    {:<72} {} [{}] {} slice(s), file {}\n", name, ckpt_dtype_name(t.dtype), fmt::join(t.shape, ", "),
                 t.slices.size(), m.files[t.slices[0].file].name);
  if (!json_out.empty()) write_file_atomic(json_out, m.to_json().dump(1) + "\n");
}

void verify(const std::string& dir) {
  const double t0 = now_seconds();
  CheckpointReader ck = CheckpointReader::open(dir);
  const uint64_t bytes = ck.verify();
  const double dt = now_seconds() - t0;
  fmt::print("{}: OK, {} tensors, every checksum verified ({:.1f} MB in {:.2f} s, {:.2f} GB/s)\n", dir,
             ck.meta().tensors.size(), double(bytes) / 1e6, dt, double(bytes) / dt / 1e9);
}

void reshape(const std::string& in, const std::string& out_root, int dp, int ep) {
  const double t0 = now_seconds();
  const std::string dir = reshape_checkpoint(in, out_root, dp, ep);
  fmt::print("wrote {} for dp {} x ep {} ({} shard files) in {:.1f} s\n", dir, dp, ep, dp * ep, now_seconds() - t0);
}

void export_weights(const std::string& in, const std::string& out, const ExportOptions& options) {
  const ExportReport r = export_model(in, out, options);
  say_source(r.source);
  for (const std::string& note : r.notes) fmt::print(stderr, "zaya ckpt export: {}\n", note);
  const std::string from = (r.step >= 0 ? fmt::format("step {} ({})", r.step, r.source.dir) : r.source.dir) +
                           (options.lora.empty() ? "" : ", LoRA adapter " + options.lora + " merged");
  const std::string replaced = r.replaced ? ", replacing what was there" : "";
  if (r.format == ExportFormat::kGguf)
    fmt::print("wrote {} (GGUF, {}, stacked expert tensors, general.name '{}', {}) from {}{}\n", out, options.dtype,
               r.name, r.tokenizer.empty() ? "no tokenizer" : "tokenizer " + r.tokenizer + " embedded", from, replaced);
  else
    fmt::print("wrote {} (config.json + model.safetensors, {}, {} layout, {}) from {}{}\n", out, options.dtype,
               r.layout == "native" ? fmt::format("native ({}-layer)", r.blocks)
                                    : fmt::format("legacy ({} half-layers)", 2 * r.blocks),
               r.tokenizer.empty() ? "no tokenizer" : "tokenizer.model from " + r.tokenizer, from, replaced);
}

void import_weights(const std::string& in, const std::string& out_root, const std::string& config_path) {
  const std::string dir = import_checkpoint(in, out_root, config_path);
  // Without --config the model's own config was recorded; training still needs a config for the data and
  // the optimizer, whose [model] describes this model (resume checks it).
  const std::string config =
      config_path.empty() ? "YOUR.toml (its [model] as `zaya info --model " + in + "` prints)" : config_path;
  fmt::print(
      "wrote {}: the weights of {} as a step-0 checkpoint{} (continue with zaya train --config {} --resume {})\n", dir,
      in, config_path.empty() ? ", with its own config.json as the model config" : "", config, dir);
}

int compare(const std::string& a, const std::string& b, double tolerance, bool weights_only) {
  const CheckpointComparison c = compare_checkpoints(a, b, tolerance, weights_only);
  if (!c.note.empty()) fmt::print("note: {}\n", c.note);
  for (const std::string& line : c.differences) fmt::print("{}\n", line);
  if (c.count() == 0)
    fmt::print("{} and {}: every {}tensor equal{}\n", a, b, c.weights_only ? "weight " : "",
               tolerance == 0 ? " bit for bit" : fmt::format(" within {:.3g}", tolerance));
  return c.count();
}

}  // namespace

void add_ckpt_command(CLI::App& app) {
  auto* ckpt = app.add_subcommand("ckpt", "inspect, verify, reshape, export and import checkpoints");
  ckpt->require_subcommand(1);
  struct Options {
    std::string dir, in, out, json_out, dtype = "f32", format = "auto", config, tokenizer, layout = "legacy", lora,
                                        experts;
    bool tensors = false, weights_only = false, force = false;
    int dp = 1, ep = 1;
    double tolerance = 0;
  };
  auto o = std::make_shared<Options>();
  auto* ins = ckpt->add_subcommand("inspect", "describe a checkpoint: step, layout, files, state, tensors");
  ins->add_option("dir", o->dir,
                  "checkpoint (step_XXXXXXXX), model directory (config.json + safetensors) or checkpoints root (its "
                  "newest valid checkpoint)")
      ->required();
  ins->add_flag("--tensors", o->tensors, "list every tensor");
  ins->add_option("--json", o->json_out, "write the metadata as JSON");
  ins->callback([o] { inspect(o->dir, o->tensors, o->json_out); });
  auto* ver = ckpt->add_subcommand("verify", "read every slice of a checkpoint and check its checksum");
  ver->add_option("dir", o->dir, "checkpoint directory")->required();
  ver->callback([o] { verify(o->dir); });
  auto* re = ckpt->add_subcommand("reshape", "rewrite a checkpoint laid out for another dp x ep mesh");
  re->add_option("--in", o->in, "checkpoint directory")->required();
  re->add_option("--out", o->out, "checkpoint root to write step_XXXXXXXX into")->required();
  re->add_option("--dp", o->dp, "data-parallel ranks of the target layout")->check(CLI::Range(1, 1 << 20));
  re->add_option("--ep", o->ep, "expert-parallel ranks of the target layout")->check(CLI::Range(1, 1 << 20));
  re->callback([o] { reshape(o->in, o->out, o->dp, o->ep); });
  auto* ex = ckpt->add_subcommand("export", "write a model's weights as a Hugging Face directory or GGUF file");
  ex->add_option("--in", o->in,
                 "checkpoint (step_XXXXXXXX), model directory (config.json + safetensors, e.g. a run's final/) or "
                 "checkpoints root (its newest valid checkpoint)")
      ->required();
  ex->add_option("--out", o->out, "output: a FILE.gguf, or a directory (safetensors)")->required();
  ex->add_option("--format", o->format, "auto (a .gguf --out is GGUF, else safetensors), safetensors or gguf")
      ->check(CLI::IsMember({"auto", "safetensors", "gguf"}));
  ex->add_option("--dtype", o->dtype,
                 "f32 or bf16 (gguf also f16, or q8_0: the int8 matrices as Q8_0 blocks, the other matrices bf16, "
                 "the bytes `--dtype int8` runs)")
      ->check(CLI::IsMember({"f32", "bf16", "f16", "q8_0"}));
  ex->add_option("--layout", o->layout,
                 "safetensors: legacy (ZAYA1-base's 80 half-layers) or native (the 40-layer layout of ZAYA1-8B and "
                 "later; refused where the skip expert could be chosen, docs/checkpoints.md)")
      ->check(CLI::IsMember({"legacy", "native"}));
  ex->add_option("--tokenizer", o->tokenizer,
                 "SentencePiece model to include (default: the one the checkpoint records, or DIR/tokenizer.model)");
  ex->add_option("--experts", o->experts,
                 "mxfp4: the routed experts in compressed-tensors' mxfp4-pack-quantized layout (--layout native), "
                 "or in a GGUF file as ggml's MXFP4; fp8: in compressed-tensors' float-quantized layout (E4M3, one "
                 "scale per output row; --layout native) (docs/formats.md, Quantized experts)")
      ->check(CLI::IsMember({"mxfp4", "fp8"}));
  ex->add_flag("--force", o->force, "replace an existing --out (in one step)");
  ex->add_option("--lora", o->lora,
                 "merge this LoRA adapter (a PEFT directory: adapter_config.json + adapter_model.safetensors) into "
                 "the weights written");
  ex->callback([o] {
    ExportOptions eo;
    eo.lora = o->lora;
    eo.format = o->format;
    eo.dtype = o->dtype;
    eo.tokenizer = o->tokenizer;
    eo.layout = o->layout;
    eo.force = o->force;
    eo.experts = o->experts;
    export_weights(o->in, o->out, eo);
  });
  auto* cmp = ckpt->add_subcommand(
      "compare",
      "compare two checkpoints or models tensor by tensor (bit for bit by default); a model directory or "
      "GGUF file on either side compares the weights only");
  const std::string side = "checkpoint (step_XXXXXXXX), model directory (config.json + safetensors) or .gguf file";
  cmp->add_option("a", o->in, side)->required();
  cmp->add_option("b", o->out, side)->required();
  cmp->add_option("--tolerance", o->tolerance, "largest allowed absolute difference (0: bitwise)");
  cmp->add_flag("--weights-only", o->weights_only, "ignore optimizer and controller state");
  cmp->callback([o] {
    const int n = compare(o->in, o->out, o->tolerance, o->weights_only);
    ZAYA_CHECK(n == 0, "{} tensor(s) differ", n);
  });
  auto* im = ckpt->add_subcommand(
      "import", "a Hugging Face ZAYA1 directory or a zaya GGUF file as a step-0 checkpoint to train from");
  im->add_option("--in", o->in, "model directory (config.json + safetensors, legacy or native layout) or .gguf file")
      ->required();
  im->add_option("--out", o->out, "checkpoint root to write step_00000000 into")->required();
  im->add_option("--config", o->config,
                 "the training config to continue with (its [model] must match; default: the model's own config, "
                 "recorded with default training settings)")
      ->check(CLI::ExistingFile);
  im->callback([o] { import_weights(o->in, o->out, o->config); });
  auto* rnd = ckpt->add_subcommand(
      "random", "write a randomly initialised model directory tensor by tensor (models too large to hold in f32)");
  struct RandomFlags {
    std::string preset, out, dtype = "bf16", layout = "native";
    uint64_t seed = 1;
    uint64_t shard_mb = 1024;
  };
  auto r = std::make_shared<RandomFlags>();
  rnd->add_option("--preset", r->preset, "model preset (zaya info --preset NAME prints its sizes)")->required();
  rnd->add_option("--out", r->out, "model directory to create (config.json + safetensors); must be new or empty")
      ->required();
  rnd->add_option("--seed", r->seed, "initialisation seed (as train.seed: the same values ZayaModel::init gives)");
  rnd->add_option("--dtype", r->dtype, "bf16 (as released) or f32")->check(CLI::IsMember({"bf16", "f32"}));
  rnd->add_option("--layout", r->layout, "native (ZAYA1-8B's 40 layers) or legacy (80 half-layers)")
      ->check(CLI::IsMember({"native", "legacy"}));
  rnd->add_option("--shard-mb", r->shard_mb, "tensor data per safetensors file, in MiB")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 20));
  rnd->callback([r] {
    RandomCheckpointOptions ro;
    ro.seed = r->seed;
    ro.dtype = r->dtype;
    ro.layout = parse_directory_layout(r->layout, "--layout");
    ro.max_shard_bytes = r->shard_mb << 20;
    const double t0 = now_seconds();
    const RandomCheckpointSummary s = write_random_model_directory(preset_config(r->preset), r->out, ro);
    fmt::print("wrote {} ({} layout, {}): {} tensors in {} file(s), {:.2f} GB, {:.1f} s\n", r->out, r->layout, r->dtype,
               s.tensors, s.files, double(s.bytes) / 1e9, now_seconds() - t0);
  });
}

}  // namespace zaya::cli
