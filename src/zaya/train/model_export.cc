#include "zaya/train/model_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/core/error.h"
#include "zaya/data/tokenizer.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/formats/model_directory.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/io/safetensors_dtype.h"
#include "zaya/train/checkpoint_tools.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

// `path` without trailing separators ("out/" -> "out"), so that its name is its last component.
fs::path without_trailing_slash(const std::string& path) {
  fs::path p(path);
  while (p.has_parent_path() && p.filename().empty() && p != p.root_path()) p = p.parent_path();
  return p;
}

// The last component of `path` made absolute ("." -> the working directory's name).
std::string base_name(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

constexpr const char* kAcceptedInputs =
    "a checkpoint (step_XXXXXXXX with metadata.json), a model directory (config.json + safetensors, e.g. a run's "
    "final/) or a checkpoints root (step_XXXXXXXX directories)";

// Whether a directory holds only what a model export (or a run's final/) holds,
// so that --force may replace it without deleting anything else.
std::string foreign_entry(const std::string& dir) {
  static const char* kKnown[] = {"config.json",           "tokenizer.model",         "tokenizer.json",
                                 "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"};
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool known = std::any_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return name == k; });
    auto ends_with = [&](std::string_view suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (!e.is_regular_file(ec) ||
        !(known || ends_with(".safetensors") || ends_with(".safetensors.index.json") || ends_with(".tmp")))
      return name;
  }
  return {};
}

// The tokenizer must fit the model it goes with (as `zaya generate` checks).
void check_export_tokenizer(const Tokenizer& tok, const ZayaConfig& c, const std::string& model) {
  ZAYA_CHECK(tok.vocab_size() <= c.real_vocab_size,
             "tokenizer '{}' has {} pieces but the model in {} predicts only ids below {} (real_vocab_size); wrong "
             "tokenizer? (--tokenizer FILE)",
             tok.model_path(), tok.vocab_size(), model, c.real_vocab_size);
  ZAYA_CHECK(tok.bos_id() == c.bos_token_id,
             "tokenizer '{}' has BOS id {} but the model in {} expects bos_token_id {}; wrong tokenizer? (--tokenizer "
             "FILE)",
             tok.model_path(), tok.bos_id(), model, c.bos_token_id);
}

// Removes a staged output unless released (an export that failed half way).
class StagedOutput {
 public:
  explicit StagedOutput(std::string path) : path_(std::move(path)) { remove(); }
  ~StagedOutput() {
    if (!released_) remove();
  }
  const std::string& path() const { return path_; }
  void release() { released_ = true; }

 private:
  void remove() noexcept {
    std::error_code ec;
    fs::remove_all(path_, ec);
    fs::remove(path_ + ".tmp", ec);
  }
  std::string path_;
  bool released_ = false;
};

}  // namespace

ModelSource resolve_model_source(const std::string& in) {
  std::error_code ec;
  const fs::path p(in);
  ZAYA_CHECK(fs::exists(p, ec), "{}: no such directory; expected {}", in, kAcceptedInputs);
  ZAYA_CHECK(fs::is_directory(p, ec), "{}: a file, not a directory; expected {}", in, kAcceptedInputs);
  ModelSource s;
  if (fs::exists(p / "metadata.json", ec)) {
    s.dir = in;
    return s;
  }
  if (fs::exists(p / "config.json", ec)) {
    s.kind = ModelSource::Kind::kModelDirectory;
    s.dir = in;
    return s;
  }
  const std::vector<std::string> steps = list_checkpoints(in);
  if (!steps.empty()) {
    s.root = in;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      try {
        const CheckpointReader ck = CheckpointReader::open(*it);
        ck.verify();
        (void)checkpoint_model_config(ck);
        s.dir = *it;
        return s;
      } catch (const Error& e) {
        const std::string why = e.what();
        s.skipped.push_back(why.rfind(*it, 0) == 0 ? why : fmt::format("{}: {}", *it, why));
      }
    }
    fail("{}: none of its {} checkpoint(s) reads completely:\n  {}", in, steps.size(), fmt::join(s.skipped, "\n  "));
  }
  if (fs::exists(p / "final" / "config.json", ec) || !list_checkpoints((p / "checkpoints").string()).empty())
    fail("{}: a run directory; give --in {} (its final weights) or {} (its newest valid checkpoint)", in,
         (p / "final").string(), (p / "checkpoints").string());
  fail("{}: not {}", in, kAcceptedInputs);
}

ExportFormat resolve_export_format(const std::string& out, const std::string& format) {
  std::string ext = without_trailing_slash(out).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  const bool gguf_name = ext == ".gguf";
  if (format == "auto") return gguf_name ? ExportFormat::kGguf : ExportFormat::kSafetensors;
  const ExportFormat* f = enum_find<ExportFormat>(kExportFormatNames, format);
  ZAYA_CHECK_USAGE(f != nullptr, "--format '{}' is invalid; allowed: auto, {}", format,
                   enum_allowed<ExportFormat>(kExportFormatNames));
  ZAYA_CHECK_USAGE(!(*f == ExportFormat::kSafetensors && gguf_name),
                   "--format safetensors writes a directory, but --out {} is named like a GGUF file (.gguf); drop "
                   "--format (a .gguf name gives GGUF) or choose an --out without .gguf",
                   out);
  return *f;
}

bool check_export_target(const std::string& out, ExportFormat format, bool force) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (!fs::exists(st)) return false;
  std::string what;
  if (fs::is_directory(st)) {
    const auto n = std::distance(fs::directory_iterator(out, ec), fs::directory_iterator());
    if (n == 0 && format == ExportFormat::kSafetensors) return false;  // an empty directory to fill
    what = n == 0 ? "an empty directory; a GGUF export is one file" : fmt::format("a directory with {} entries", n);
    if (force) {
      const std::string foreign = foreign_entry(out);
      ZAYA_CHECK(foreign.empty(),
                 "--out {} holds '{}', which no model export writes; not replacing it even with --force (that would "
                 "delete it): remove it or choose another --out",
                 out, foreign);
    }
  } else if (fs::is_regular_file(st)) {
    what = fmt::format("a file of {} bytes", fs::file_size(out, ec));
  } else {
    what = "neither a file nor a directory";
  }
  ZAYA_CHECK(force,
             "--out {} exists ({}); pass --force to replace it (in one step: never half old, half new) or choose "
             "another --out",
             out, what);
  return true;
}

std::string export_model_name(const ModelSource& source) {
  std::string name;
  if (source.kind == ModelSource::Kind::kCheckpoint) {
    try {
      const std::string out_dir = checkpoint_train_config(CheckpointReader::open(source.dir)).run.out_dir;
      if (!out_dir.empty()) name = base_name(out_dir);
    } catch (const Error&) {
    }
  } else {
    std::error_code ec;
    fs::path dir = fs::absolute(source.dir, ec).lexically_normal();
    if (dir.filename().empty()) dir = dir.parent_path();
    // A run's final/ is named after the run, like its checkpoints.
    if (dir.filename() == "final" && fs::exists(dir.parent_path() / "config.toml", ec)) dir = dir.parent_path();
    name = dir.filename().string();
  }
  return name.empty() ? std::string("zaya") : name;
}

ExportReport export_model(const std::string& in, const std::string& out, const ExportOptions& o) {
  ExportReport r;
  r.format = resolve_export_format(out, o.format);
  ZAYA_CHECK_USAGE(o.dtype == "f32" || o.dtype == "bf16" || o.dtype == "f16" || o.dtype == "q8_0",
                   "--dtype '{}' is invalid; allowed: f32, bf16{}", o.dtype,
                   r.format == ExportFormat::kGguf ? ", f16, q8_0" : "");
  ZAYA_CHECK_USAGE(r.format == ExportFormat::kGguf || (o.dtype != "f16" && o.dtype != "q8_0"),
                   "--dtype {} is only for --format gguf (allowed: f32, bf16)", o.dtype);
  const DirectoryLayout layout = parse_directory_layout(o.layout, "--layout");
  ZAYA_CHECK_USAGE(
      o.experts.empty() ||
          (o.experts == "mxfp4" && (r.format == ExportFormat::kGguf || layout == DirectoryLayout::kNative)) ||
          (o.experts == "fp8" && r.format == ExportFormat::kSafetensors && layout == DirectoryLayout::kNative),
      "--experts '{}': allowed: mxfp4, with --layout native to a directory (compressed-tensors' "
      "mxfp4-pack-quantized experts) or to a GGUF file (ggml's MXFP4 expert tensors); fp8, with --layout "
      "native to a directory (compressed-tensors' float-quantized channel FP8 experts)",
      o.experts);
  ZAYA_CHECK_USAGE(r.format == ExportFormat::kSafetensors || layout == DirectoryLayout::kLegacy,
                   "--layout native is for a Hugging Face directory; a GGUF file has its own tensor names "
                   "(docs/formats-gguf.md): drop --layout or choose an --out without .gguf");
  r.layout = directory_layout_name(layout);
  const std::string target = without_trailing_slash(out).string();
  r.replaced = check_export_target(target, r.format, o.force);
  r.source = resolve_model_source(in);

  std::unique_ptr<ZayaModel> model;
  std::string recorded_tokenizer;
  bool native_source = false;
  if (r.source.kind == ModelSource::Kind::kCheckpoint) {
    const CheckpointReader ck = CheckpointReader::open(r.source.dir);
    model = load_checkpoint_model(ck);
    r.step = ck.meta().step;
    recorded_tokenizer = checkpoint_tokenizer(ck);
  } else {
    model = load_model_directory(r.source.dir, &native_source);
    recorded_tokenizer = (fs::path(r.source.dir) / "tokenizer.model").string();
    const std::vector<int> live = live_skip_half_layers(model->config(), model->buffers(), model->buffer_data());
    if (native_source && layout == DirectoryLayout::kLegacy && model->config().use_skip &&
        model->config().skip_output_zero)
      r.notes.push_back(
          live.empty()
              ? fmt::format("{} is in the native layout, whose skip expert outputs 0 (Zyphra's legacy code: "
                            "p_skip * x); its balancing biases keep the skip slot from ever being chosen in every "
                            "layer, so the legacy export computes the same everywhere (docs/spec.md §8.1)",
                            r.source.dir)
              : fmt::format("{} is in the native layout, whose skip expert outputs 0; in half-layer(s) {} the skip "
                            "slot can be chosen: the export's config.json keeps the rule (zaya_skip_output_zero), "
                            "which zaya reads and Zyphra's legacy code does not (it computes p_skip * x there; "
                            "docs/spec.md §8.1)",
                            r.source.dir, fmt::join(live, ", ")));
  }
  const ZayaConfig& config = model->config();
  r.blocks = config.num_blocks;
  // --lora: the merged full weights W + alpha / rank * B A (model/lora.h).
  if (!o.lora.empty()) merge_lora(*read_peft_adapter(o.lora, config), model->weights());
  // A native source keeps its own semantics in the native layout; legacy weights only where they compute the same.
  if (r.format == ExportFormat::kSafetensors && layout == DirectoryLayout::kNative && !native_source) {
    const std::string why = native_export_problem(config, model->buffers(), model->buffer_data(), r.source.dir);
    ZAYA_CHECK(why.empty(), "--layout native: {}", why);
  }

  std::optional<Tokenizer> tok;
  std::error_code ec;
  if (!o.tokenizer.empty())
    tok.emplace(Tokenizer::load(o.tokenizer));
  else if (!recorded_tokenizer.empty() && fs::is_regular_file(recorded_tokenizer, ec))
    tok.emplace(Tokenizer::load(recorded_tokenizer));
  if (tok) {
    check_export_tokenizer(*tok, config, r.source.dir);
    r.tokenizer = tok->model_path();
  } else {
    const std::string why = recorded_tokenizer.empty() ? fmt::format("{} records no tokenizer", r.source.dir)
                                                       : fmt::format("{} names '{}', which does not exist here",
                                                                     r.source.dir, recorded_tokenizer);
    r.notes.push_back(
        r.format == ExportFormat::kGguf
            ? fmt::format("{} has no tokenizer ({}): `zaya generate --model {}` will need --tokenizer FILE or a "
                          "tokenizer.model beside it; to embed one, export again with --tokenizer FILE --force",
                          target, why, target)
            : fmt::format("{} has no tokenizer ({}): add one with `cp TOKENIZER.model {}/tokenizer.model`, or "
                          "export again with --tokenizer FILE --force",
                          target, why, target));
  }
  r.name = export_model_name(r.source);

  // Written beside the target under a hidden name, then put in place in one step.
  const fs::path parent = fs::absolute(target, ec).parent_path();
  fs::create_directories(parent, ec);
  ZAYA_CHECK(!ec, "cannot create directory '{}': {}", parent.string(), ec.message());
  StagedOutput staged((parent / ("." + fs::path(target).filename().string() + ".export")).string());
  const std::vector<NamedTensor> tensors = complete_model_tensors(*model);
  if (r.format == ExportFormat::kGguf) {
    GgufSaveOptions save;
    save.dtype = o.dtype;
    save.experts = o.experts;
    save.name = r.name;
    if (tok) save.extra_metadata = gguf_vocab_metadata(tokenizer_gguf_vocab(*tok, config.vocab_size));
    write_zaya_gguf(config, tensors, staged.path(), save);
  } else {
    HfSaveOptions save;
    save.dtype = o.dtype;
    save.experts = o.experts;
    save_model_directory(config, tensors, staged.path(), layout, save);
    if (tok) write_file_atomic((fs::path(staged.path()) / "tokenizer.model").string(), tok->serialized());
  }
  replace_path_atomically(staged.path(), target);
  staged.release();
  return r;
}

uint64_t ModelDirectoryInfo::bytes() const {
  uint64_t total = 0;
  for (const File& f : files) total += f.bytes;
  return total;
}

nlohmann::json ModelDirectoryInfo::to_json() const {
  nlohmann::json file_json = nlohmann::json::array(), tensor_json = nlohmann::json::object();
  for (const File& f : files) file_json.push_back({{"name", f.name}, {"bytes", f.bytes}});
  for (const Tensor& t : tensors) tensor_json[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"file", t.file}};
  return {{"kind", "model_directory"},
          {"dir", dir},
          {"layout", native ? "native" : "legacy"},
          {"model", config_to_hf_json(config, "float32")},
          {"tokenizer", tokenizer.empty() ? nlohmann::json() : nlohmann::json(tokenizer)},
          {"files", file_json},
          {"tensors", tensor_json}};
}

ModelDirectoryInfo describe_model_directory(const std::string& dir) {
  ModelDirectoryInfo info;
  info.dir = dir;
  info.config = read_model_directory_config(dir, &info.native);
  const SafetensorsDir st = SafetensorsDir::open(dir);
  std::error_code ec;
  for (const SafetensorsFile& f : st.shards()) {
    const uintmax_t size = fs::file_size(f.path(), ec);
    info.files.push_back({fs::path(f.path()).filename().string(), ec ? 0 : uint64_t(size)});
  }
  std::set<std::string> dtypes;
  for (const std::string& name : st.names()) {
    const SafetensorsTensorInfo& t = st.info(name);
    dtypes.insert(std::string(dtype_name(t.dtype)));
    info.tensors.push_back(
        {name, std::string(dtype_name(t.dtype)), fs::path(st.file_of(name).path()).filename().string(), t.shape});
  }
  info.dtypes.assign(dtypes.begin(), dtypes.end());
  const std::string tokenizer = (fs::path(dir) / "tokenizer.model").string();
  if (fs::is_regular_file(tokenizer, ec)) info.tokenizer = tokenizer;
  return info;
}

}  // namespace zaya
