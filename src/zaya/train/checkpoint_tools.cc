#include "zaya/train/checkpoint_tools.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/ckpt/offline.h"
#include "zaya/ckpt/writer.h"
#include "zaya/core/error.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/dist/comm.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/model_directory.h"
#include "zaya/model/config_toml.h"
#include "zaya/train/state_tensors.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

// lora: the run's [lora] (a LoRA run's checkpoints hold the adapters, not the base).
std::vector<std::vector<OfflineTensor>> offline_layout(const ZayaConfig& c, int dp, int ep, bool muon,
                                                       bool with_optimizer, const LoraConfig& lora = {}) {
  std::vector<std::vector<OfflineTensor>> out;
  for (const std::vector<StateTensor>& rank : lora.enabled ? lora_mesh_state_tensors(c, lora, dp, ep, with_optimizer)
                                                           : mesh_state_tensors(c, dp, ep, muon, with_optimizer)) {
    out.emplace_back();
    for (const StateTensor& t : rank) out.back().push_back({t.name, t.dtype, t.shape});
  }
  return out;
}

// One side of compare_checkpoints: its tensors (name -> dtype, shape) and a reader.
struct ComparedSide {
  std::string path;
  bool weights_only = false;  // a model directory or GGUF file: no optimizer or controller state
  std::map<std::string, std::pair<CkptDType, std::vector<int64_t>>> tensors;
  std::function<void(const std::string&, void*, CkptDType, const std::vector<int64_t>&)> read;
};

ComparedSide open_compared(const std::string& path) {
  ComparedSide s;
  s.path = path;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    ZAYA_CHECK(is_gguf_file(path),
               "{}: a file, but not a GGUF file; compare reads checkpoints (step_XXXXXXXX), "
               "model directories (config.json + safetensors) and .gguf files",
               path);
    auto gguf = std::make_shared<ZayaGgufFile>(ZayaGgufFile::open(path));
    s.weights_only = true;
    for (const ZayaGgufFile::LegacyTensor& t : gguf->legacy_tensors()) s.tensors[t.name] = {CkptDType::kF32, t.shape};
    s.read = [gguf](const std::string& name, void* dst, CkptDType, const std::vector<int64_t>& shape) {
      gguf->read_legacy(name, static_cast<float*>(dst), shape);
    };
    return s;
  }
  if (!fs::exists(fs::path(path) / "metadata.json", ec) && fs::exists(fs::path(path) / "config.json", ec)) {
    std::shared_ptr<ZayaModel> model = load_model_directory(path);  // either layout, float32, legacy names
    s.weights_only = true;
    for (const ParamTable* table : {&model->params(), &model->buffers()})
      for (const ParamEntry& e : table->entries()) s.tensors[e.name] = {CkptDType::kF32, e.shape};
    s.read = [model](const std::string& name, void* dst, CkptDType, const std::vector<int64_t>&) {
      const ParamEntry* e = model->params().find(name);
      const float* src = e ? model->param_data() + e->offset : model->buffer_data() + model->buffers().at(name).offset;
      std::memcpy(dst, src, sizeof(float) * size_t(e ? e->numel : model->buffers().at(name).numel));
    };
    return s;
  }
  auto ck = std::make_shared<CheckpointReader>(CheckpointReader::open(path));
  for (const auto& [name, t] : ck->meta().tensors) s.tensors[name] = {t.dtype, t.shape};
  s.read = [ck](const std::string& name, void* dst, CkptDType dtype, const std::vector<int64_t>& shape) {
    ck->read(name, dst, dtype, shape);
  };
  return s;
}

}  // namespace

TrainConfig checkpoint_train_config(const CheckpointReader& ck) {
  return parse_train_config(ck.meta().config_toml, ck.dir() + "/metadata.json (config)");
}

std::string reshape_checkpoint(const std::string& in, const std::string& out_root, int dp, int ep) {
  CheckpointReader ck = CheckpointReader::open(in);
  TrainConfig config = checkpoint_train_config(ck);
  ZAYA_CHECK(config.model.experts % ep == 0, "--ep {} is invalid; allowed: a divisor of the expert count ({})", ep,
             config.model.experts);
  const bool with_optimizer = ck.meta().state.value("optimizer_state", false);
  const auto layout = offline_layout(config.model, dp, ep, config.optim.use_muon, with_optimizer, config.lora);
  config.parallel.ep = ep;
  CheckpointMeta header = ck.meta();
  header.config_toml = train_config_to_toml(config);
  write_checkpoint_offline(out_root, header, dp, ep, layout,
                           [&](const OfflineTensor& t, void* dst) { ck.read(t.name, dst, t.dtype, t.shape); });
  return (fs::path(out_root) / checkpoint_dir_name(ck.meta().step)).string();
}

TrainConfig imported_train_config(const ZayaConfig& model, const std::string& tokenizer, const std::string& source) {
  // The preset the model is (vocabularies aside: they follow the tokenizer), else tiny's keys overridden one by one.
  std::string preset = "tiny";
  for (const std::string& name : preset_names()) {
    ZayaConfig p = preset_config(name);
    p.vocab_size = model.vocab_size;
    p.real_vocab_size = model.real_vocab_size;
    if (config_to_hf_json(p, "float32") == config_to_hf_json(model, "float32")) {
      preset = name;
      break;
    }
  }
  // Through the one parser, so the config recorded is one `zaya train` reads back. A data directory is
  // required there but not known here: the run that resumes gives its own [data] (only [model] is checked).
  const std::string text =
      model_table_to_toml(preset, model, "") +
      fmt::format("[data]\ndir = \"(none: imported; the training config gives [data])\"\ntokenizer = {}\n",
                  nlohmann::json(tokenizer).dump());
  return parse_train_config(text, source);
}

std::string import_checkpoint(const std::string& in, const std::string& out_root, const std::string& config_path) {
  const bool is_gguf = fs::is_regular_file(in);
  std::unique_ptr<ZayaModel> model;
  std::optional<ZayaGgufFile> gguf;
  if (is_gguf)
    gguf.emplace(ZayaGgufFile::open(in));
  else
    model = load_model_directory(in);  // either layout
  const ZayaConfig& source = is_gguf ? gguf->config() : model->config();
  std::string tokenizer;  // the directory's own, for a config made here
  if (std::error_code ec; !is_gguf && fs::exists(fs::path(in) / "tokenizer.model", ec))
    tokenizer = fs::absolute(fs::path(in) / "tokenizer.model").string();
  TrainConfig config = config_path.empty() ? imported_train_config(source, tokenizer, in + " (config.json)")
                                           : load_train_config(config_path);
  // The config's vocabulary is decided by the data when not given: take the model's.
  ZayaConfig want = config.model;
  if (config.vocab_from_tokenizer) {
    want.vocab_size = source.vocab_size;
    want.real_vocab_size = source.real_vocab_size;
    config.model = want;
    config.vocab_from_tokenizer = false;
  }
  // The fields a [model] table holds: not the token ids (a [model] table has no key for them, so an eos list of
  // a transformers-saved config.json could never match) nor how RoPE angles are computed (no weight depends on
  // it: the config's decides). The checkpoint records the source's own config below, token ids included.
  const std::vector<std::string> differences = model_differences(want, source);
  ZAYA_CHECK(differences.empty(),
             "{}: [model] does not describe the model in {}: {} (compare `zaya info --model {}` with `zaya info "
             "--config {}`)",
             config_path.empty() ? "the imported config" : config_path, in, fmt::join(differences, "; "), in,
             config_path);
  CheckpointMeta header;
  auto self = make_self_comm();
  header.run_id = new_run_id(*self);
  header.step = 0;
  header.state = {{"step", 0}, {"optimizer_state", false}, {"imported_from", fs::absolute(in).string()}};
  header.config_toml = train_config_to_toml(config);
  header.model_config = checkpoint_model_json(source);
  header.tokenizer = config.data.tokenizer;
  write_checkpoint_offline(
      out_root, header, 1, 1, offline_layout(source, 1, 1, true, false), [&](const OfflineTensor& t, void* dst) {
        if (is_gguf) {
          gguf->read_legacy(t.name, static_cast<float*>(dst), t.shape);
          return;
        }
        const ParamEntry* e = model->params().find(t.name);
        const float* src =
            e ? model->param_data() + e->offset : model->buffer_data() + model->buffers().at(t.name).offset;
        std::memcpy(dst, src, sizeof(float) * size_t(t.numel()));
      });
  return (fs::path(out_root) / checkpoint_dir_name(0)).string();
}

CheckpointComparison compare_checkpoints(const std::string& a_dir, const std::string& b_dir, double tolerance,
                                         bool weights_only) {
  const ComparedSide a = open_compared(a_dir), b = open_compared(b_dir);
  CheckpointComparison out;
  if ((a.weights_only || b.weights_only) && !weights_only) {
    weights_only = true;
    out.note = fmt::format("weights only: {} holds no optimizer or controller state", a.weights_only ? a_dir : b_dir);
  }
  out.weights_only = weights_only;
  auto keep = [&](const std::string& name) { return !weights_only || !is_optimizer_state_tensor(name); };
  for (const auto& [name, ta_info] : a.tensors) {
    if (!keep(name)) continue;
    const auto it = b.tensors.find(name);
    if (it == b.tensors.end()) {
      out.differences.push_back(fmt::format("{}: only in {}", name, a_dir));
      continue;
    }
    const auto& [a_dtype, a_shape] = ta_info;
    const auto& [b_dtype, b_shape] = it->second;
    if (a_dtype != b_dtype || a_shape != b_shape) {
      out.differences.push_back(fmt::format("{}: {} [{}] vs {} [{}]", name, ckpt_dtype_name(a_dtype),
                                            fmt::join(a_shape, ","), ckpt_dtype_name(b_dtype),
                                            fmt::join(b_shape, ",")));
      continue;
    }
    size_t n = 1;
    for (int64_t d : a_shape) n *= size_t(d);
    std::vector<double> x(n), y(n);
    if (a_dtype == CkptDType::kF64) {
      a.read(name, x.data(), a_dtype, a_shape);
      b.read(name, y.data(), b_dtype, b_shape);
    } else {
      std::vector<float> fx(n), fy(n);
      a.read(name, fx.data(), a_dtype, a_shape);
      b.read(name, fy.data(), b_dtype, b_shape);
      x.assign(fx.begin(), fx.end());
      y.assign(fy.begin(), fy.end());
      // Bitwise for float32: compare the bits, not the values (-0 vs 0, NaN payloads).
      if (tolerance == 0 && std::memcmp(fx.data(), fy.data(), n * 4) != 0) {
        out.differences.push_back(fmt::format("{}: bits differ", name));
        continue;
      }
    }
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
    if (worst > tolerance)
      out.differences.push_back(fmt::format("{}: largest difference {:.3g} > {:.3g}", name, worst, tolerance));
  }
  for (const auto& [name, tb] : b.tensors)
    if (keep(name) && !a.tensors.count(name)) out.differences.push_back(fmt::format("{}: only in {}", name, b_dir));
  return out;
}

}  // namespace zaya
