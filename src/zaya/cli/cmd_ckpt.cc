// zaya ckpt inspect | verify | reshape | export | import: checkpoint tools (docs/checkpoints.md).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "zaya/ckpt/offline.h"
#include "zaya/ckpt/reader.h"
#include "zaya/ckpt/writer.h"
#include "zaya/cli/commands.h"
#include "zaya/core/arena.h"
#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/dist/comm.h"
#include "zaya/model/gguf_zaya.h"
#include "zaya/model/hf_checkpoint.h"
#include "zaya/model/hf_config.h"
#include "zaya/model/params.h"
#include "zaya/train/train_config.h"

namespace zaya::cli {
namespace {

namespace fs = std::filesystem;

// The model config a checkpoint was trained with.
TrainConfig checkpoint_config(const CheckpointReader& ck) {
  return parse_train_config(ck.meta().config_toml, ck.dir() + "/metadata.json (config)");
}

void inspect(const std::string& dir, bool tensors, const std::string& json_out) {
  CheckpointReader ck = CheckpointReader::open(dir);
  const CheckpointMeta& m = ck.meta();
  const TrainConfig config = checkpoint_config(ck);
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
  if (!json_out.empty()) std::ofstream(json_out) << m.to_json().dump(1) << "\n";
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
  CheckpointReader ck = CheckpointReader::open(in);
  TrainConfig config = checkpoint_config(ck);
  ZAYA_CHECK(config.model.experts % ep == 0, "--ep {} is invalid; allowed: a divisor of the expert count ({})", ep,
             config.model.experts);
  const bool with_optimizer = ck.meta().state.value("optimizer_state", false);
  auto layout = checkpoint_layout(config.model, dp, ep, config.optim.use_muon, with_optimizer);
  config.parallel.ep = ep;
  CheckpointMeta header = ck.meta();
  header.config_toml = train_config_to_toml(config);
  const double t0 = now_seconds();
  write_checkpoint_offline(out_root, header, dp, ep, layout,
                           [&](const OfflineTensor& t, void* dst) { ck.read(t.name, dst, t.dtype, t.shape); });
  fmt::print("wrote {}/{} for dp {} x ep {} ({} shard files) in {:.1f} s\n", out_root,
             checkpoint_dir_name(ck.meta().step), dp, ep, dp * ep, now_seconds() - t0);
}

// A checkpoint's weights (parameters, then buffers) in full precision, under
// their legacy names: what every export format writes.
struct ExportedWeights {
  TrainConfig config;
  int64_t step = 0;
  std::unique_ptr<Arena> params, buffers;
  std::vector<NamedTensor> tensors;
};

ExportedWeights read_weights(const std::string& in) {
  CheckpointReader ck = CheckpointReader::open(in);
  ExportedWeights w;
  w.config = checkpoint_config(ck);
  w.step = ck.meta().step;
  ParamTable params(w.config.model, true), buffers(w.config.model, false);
  w.params = std::make_unique<Arena>(params.total_floats());
  w.buffers = std::make_unique<Arena>(std::max<int64_t>(1, buffers.total_floats()));
  for (const ParamEntry& e : params.entries()) {
    ck.read(e.name, w.params->data() + e.offset, CkptDType::kF32, e.shape);
    w.tensors.push_back({e.name, e.shape, w.params->data() + e.offset, false});
  }
  for (const ParamEntry& e : buffers.entries()) {
    ck.read(e.name, w.buffers->data() + e.offset, CkptDType::kF32, e.shape);
    w.tensors.push_back({e.name, e.shape, w.buffers->data() + e.offset, true});
  }
  return w;
}

void export_weights(const std::string& in, const std::string& out, const std::string& format,
                    const std::string& dtype) {
  const ExportedWeights w = read_weights(in);
  if (format == "gguf") {
    GgufSaveOptions save;
    save.dtype = dtype;
    write_zaya_gguf(w.config.model, w.tensors, out, save);
    fmt::print("wrote {} (GGUF, {}, stacked expert tensors) from step {}\n", out, dtype, w.step);
    return;
  }
  HfSaveOptions save;
  save.dtype = dtype;
  save_hf_tensors(w.config.model, w.tensors, out, save);
  fmt::print("wrote {} (config.json + model.safetensors, {}, legacy ZAYA1 names) from step {}\n", out, dtype, w.step);
}

// A Hugging Face ZAYA1 directory or one of our GGUF files as a step-0 checkpoint.
void import_weights(const std::string& in, const std::string& out_root, const std::string& config_path) {
  TrainConfig config = load_train_config(config_path);
  const bool is_gguf = fs::is_regular_file(in);
  std::unique_ptr<ZayaModel> model;
  std::optional<ZayaGgufFile> gguf;
  if (is_gguf)
    gguf.emplace(ZayaGgufFile::open(in));
  else
    model = load_hf_model(in);
  const ZayaConfig& source = is_gguf ? gguf->config() : model->config();
  // The config's vocabulary is decided by the data when not given: take the model's.
  ZayaConfig want = config.model;
  if (config.vocab_from_tokenizer) {
    want.vocab_size = source.vocab_size;
    want.real_vocab_size = source.real_vocab_size;
    config.model = want;
    config.vocab_from_tokenizer = false;
  }
  ZAYA_CHECK(config_to_hf_json(want, "float32") == config_to_hf_json(source, "float32"),
             "{}: [model] does not describe the model in {} (compare `zaya info --model {}` with `zaya info "
             "--config {}`)",
             config_path, in, in, config_path);
  CheckpointMeta header;
  auto self = make_self_comm();
  header.run_id = new_run_id(*self);
  header.step = 0;
  header.state = {{"step", 0}, {"optimizer_state", false}, {"imported_from", fs::absolute(in).string()}};
  header.config_toml = train_config_to_toml(config);
  write_checkpoint_offline(
      out_root, header, 1, 1, checkpoint_layout(source, 1, 1, true, false), [&](const OfflineTensor& t, void* dst) {
        if (is_gguf) {
          gguf->read_legacy(t.name, static_cast<float*>(dst), t.shape);
          return;
        }
        const ParamEntry* e = model->params().find(t.name);
        const float* src =
            e ? model->param_data() + e->offset : model->buffer_data() + model->buffers().at(t.name).offset;
        std::memcpy(dst, src, sizeof(float) * size_t(t.numel()));
      });
  fmt::print(
      "wrote {}/{}: the weights of {} as a step-0 checkpoint (continue with zaya train --config {} --resume "
      "{}/{})\n",
      out_root, checkpoint_dir_name(0), in, config_path, out_root, checkpoint_dir_name(0));
}

// Tensor-by-tensor comparison; returns the number of tensors that differ.
int compare(const std::string& a_dir, const std::string& b_dir, double tolerance, bool weights_only) {
  CheckpointReader a = CheckpointReader::open(a_dir), b = CheckpointReader::open(b_dir);
  int differing = 0;
  auto keep = [&](const std::string& name) {
    return !weights_only || (name.rfind("optim.", 0) != 0 && name.rfind("balance.", 0) != 0);
  };
  for (const auto& [name, ta] : a.meta().tensors) {
    if (!keep(name)) continue;
    if (!b.has(name)) {
      fmt::print("{}: only in {}\n", name, a_dir);
      ++differing;
      continue;
    }
    const CkptTensor& tb = b.meta().tensors.at(name);
    if (ta.dtype != tb.dtype || ta.shape != tb.shape) {
      fmt::print("{}: {} [{}] vs {} [{}]\n", name, ckpt_dtype_name(ta.dtype), fmt::join(ta.shape, ","),
                 ckpt_dtype_name(tb.dtype), fmt::join(tb.shape, ","));
      ++differing;
      continue;
    }
    const size_t n = size_t(ta.numel());
    std::vector<double> x(n), y(n);
    if (ta.dtype == CkptDType::kF64) {
      a.read(name, x.data(), ta.dtype, ta.shape);
      b.read(name, y.data(), tb.dtype, tb.shape);
    } else {
      std::vector<float> fx(n), fy(n);
      a.read(name, fx.data(), ta.dtype, ta.shape);
      b.read(name, fy.data(), tb.dtype, tb.shape);
      x.assign(fx.begin(), fx.end());
      y.assign(fy.begin(), fy.end());
      // Bitwise for float32: compare the bits, not the values (-0 vs 0, NaN payloads).
      if (tolerance == 0 && std::memcmp(fx.data(), fy.data(), n * 4) != 0) {
        fmt::print("{}: bits differ\n", name);
        ++differing;
        continue;
      }
    }
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
    if (worst > tolerance) {
      fmt::print("{}: largest difference {:.3g} > {:.3g}\n", name, worst, tolerance);
      ++differing;
    }
  }
  for (const auto& [name, tb] : b.meta().tensors)
    if (keep(name) && !a.has(name)) {
      fmt::print("{}: only in {}\n", name, b_dir);
      ++differing;
    }
  if (differing == 0)
    fmt::print("{} and {}: every {}tensor equal{}\n", a_dir, b_dir, weights_only ? "weight " : "",
               tolerance == 0 ? " bit for bit" : fmt::format(" within {:.3g}", tolerance));
  return differing;
}

}  // namespace

void add_ckpt_command(CLI::App& app) {
  auto* ckpt = app.add_subcommand("ckpt", "inspect, verify, reshape, export and import checkpoints");
  ckpt->require_subcommand(1);
  struct Options {
    std::string dir, in, out, json_out, dtype = "f32", format = "safetensors", config;
    bool tensors = false, weights_only = false;
    int dp = 1, ep = 1;
    double tolerance = 0;
  };
  auto o = std::make_shared<Options>();
  auto* ins = ckpt->add_subcommand("inspect", "describe a checkpoint: step, layout, files, state, tensors");
  ins->add_option("dir", o->dir, "checkpoint directory (step_XXXXXXXX)")->required();
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
  auto* ex = ckpt->add_subcommand("export", "write a checkpoint's weights as a Hugging Face directory or GGUF file");
  ex->add_option("--in", o->in, "checkpoint directory")->required();
  ex->add_option("--out", o->out, "output directory (safetensors) or file (gguf)")->required();
  ex->add_option("--format", o->format, "safetensors or gguf")->check(CLI::IsMember({"safetensors", "gguf"}));
  ex->add_option("--dtype", o->dtype, "f32 or bf16 (gguf also f16)")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  ex->callback([o] {
    ZAYA_CHECK(o->format == "gguf" || o->dtype != "f16", "--dtype f16 is only for --format gguf (allowed: f32, bf16)");
    export_weights(o->in, o->out, o->format, o->dtype);
  });
  auto* cmp = ckpt->add_subcommand("compare", "compare two checkpoints tensor by tensor (bit for bit by default)");
  cmp->add_option("a", o->in, "checkpoint directory")->required();
  cmp->add_option("b", o->out, "checkpoint directory")->required();
  cmp->add_option("--tolerance", o->tolerance, "largest allowed absolute difference (0: bitwise)");
  cmp->add_flag("--weights-only", o->weights_only, "ignore optimizer and controller state");
  cmp->callback([o] {
    const int n = compare(o->in, o->out, o->tolerance, o->weights_only);
    ZAYA_CHECK(n == 0, "{} tensor(s) differ", n);
  });
  auto* im = ckpt->add_subcommand(
      "import", "a Hugging Face ZAYA1 directory or a zaya GGUF file as a step-0 checkpoint to train from");
  im->add_option("--in", o->in, "model directory (config.json + safetensors, legacy ZAYA1 names) or .gguf file")
      ->required();
  im->add_option("--out", o->out, "checkpoint root to write step_00000000 into")->required();
  im->add_option("--config", o->config, "the training config to continue with (its [model] must match)")
      ->required()
      ->check(CLI::ExistingFile);
  im->callback([o] { import_weights(o->in, o->out, o->config); });
}

}  // namespace zaya::cli
