#pragma once
// `zaya ckpt export` and what `zaya ckpt inspect` reads (docs/checkpoints.md,
// "Exports"): a checkpoint, a model directory or a checkpoints root, written as
// a Hugging Face directory (with tokenizer.model) or one GGUF file (the
// tokenizer embedded, data/tokenizer_gguf.h); the format from the output's
// name; an existing output replaced only with --force, in one step.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/core/enum_names.h"
#include "zaya/model/config.h"

namespace zaya {

// What `zaya ckpt export` and `ckpt inspect` read (`in`): a checkpoint
// (step_XXXXXXXX with metadata.json), a model directory (config.json +
// safetensors, e.g. a run's final/; legacy or native layout; weights only), or
// a checkpoints root, whose newest checkpoint that reads completely (every
// checksum) is used, walking back past damaged ones as `zaya train --resume
// latest` does. A run's directory and anything else are refused, saying what
// is accepted.
struct ModelSource {
  enum class Kind { kCheckpoint, kModelDirectory };
  Kind kind = Kind::kCheckpoint;
  std::string dir;                   // the step or model directory to read
  std::string root;                  // the checkpoints root it was picked from, else empty
  std::vector<std::string> skipped;  // newer checkpoints of the root passed over: "DIR: why"
};
ModelSource resolve_model_source(const std::string& in);

// What `zaya ckpt export` writes (core/enum_names.h): a Hugging Face directory or one GGUF file.
enum class ExportFormat { kSafetensors, kGguf };
inline constexpr EnumName<ExportFormat> kExportFormatNames[] = {{ExportFormat::kSafetensors, "safetensors"},
                                                                {ExportFormat::kGguf, "gguf"}};

// The output format for `out`, parsed from --format's text: "auto" gives gguf
// for a name ending in .gguf, else safetensors (a directory); an explicit
// "safetensors" with a .gguf name is refused naming both; "gguf" is taken as
// given; another name is refused listing the allowed ones.
ExportFormat resolve_export_format(const std::string& out, const std::string& format);

// Refuses an existing output that is not an empty directory (an empty one
// only for safetensors), unless `force`; returns whether something is there
// to replace.
bool check_export_target(const std::string& out, ExportFormat format, bool force);

// general.name of a GGUF export: the run's name (the checkpoint's out_dir,
// or the run directory holding a final/ model directory), else the model
// directory's name, else "zaya".
std::string export_model_name(const ModelSource& source);

struct ExportOptions {
  std::string format = "auto";    // auto, safetensors, gguf
  std::string dtype = "f32";      // f32, bf16 (gguf also f16, q8_0)
  std::string tokenizer;          // overrides the checkpoint's recorded tokenizer / the directory's tokenizer.model
  std::string layout = "legacy";  // safetensors: legacy (80 half-layers) or native (40 layers); GGUF: legacy only
  bool force = false;             // replace an existing output (atomically)
  std::string lora;               // a PEFT LoRA adapter directory merged into the weights written (--lora)
  std::string experts;            // "mxfp4" / "fp8": compressed-tensors MXFP4 / channel FP8 experts (--experts)
};

struct ExportReport {
  ExportFormat format = ExportFormat::kSafetensors;  // what was written
  ModelSource source;
  int64_t step = -1;               // the checkpoint's step (-1: a model directory)
  std::string tokenizer;           // the tokenizer written (copied or embedded), empty for none
  std::string name;                // general.name (gguf)
  std::string layout;              // the layout written (safetensors): "legacy" or "native"
  int64_t blocks = 0;              // this model's blocks: the native layout's layers, half the legacy half-layers
  bool replaced = false;           // an existing output was replaced (--force)
  std::vector<std::string> notes;  // for stderr: no tokenizer and how to add one, skip-expert semantics
};

// Writes the weights of `in` (resolve_model_source) to `out`: a Hugging Face
// directory (config.json + model.safetensors in the legacy or native layout,
// + tokenizer.model) or one GGUF file (stacked experts, the tokenizer's vocabulary and its
// SentencePiece model embedded). The output appears in one step
// (replace_path_atomically): never half written, never half old and half new.
// The native layout is refused, naming the half-layers, when the model (a
// checkpoint or a legacy directory, legacy semantics) could choose its skip
// expert somewhere (native_export_problem): the native file would compute
// something else there.
ExportReport export_model(const std::string& in, const std::string& out, const ExportOptions& options);

// What `zaya ckpt inspect` shows of a model directory (weights only: no step,
// optimizer or data state): its layout, config, files, tensors and its
// tokenizer.model when there is one.
struct ModelDirectoryInfo {
  struct File {
    std::string name;
    uint64_t bytes = 0;
  };
  struct Tensor {
    std::string name, dtype, file;
    std::vector<int64_t> shape;
  };
  std::string dir;
  bool native = false;
  ZayaConfig config;
  std::vector<File> files;
  std::vector<Tensor> tensors;      // in the directory's order
  std::vector<std::string> dtypes;  // the distinct tensor dtypes, sorted
  std::string tokenizer;            // DIR/tokenizer.model, empty when there is none

  uint64_t bytes() const;
  // {"kind": "model_directory", "dir", "layout", "model" (config.json's keys), "tokenizer", "files", "tensors"}
  nlohmann::json to_json() const;
};
ModelDirectoryInfo describe_model_directory(const std::string& dir);

}  // namespace zaya
