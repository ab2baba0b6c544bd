#pragma once
// The checkpoint tools behind `zaya ckpt` (docs/checkpoints.md): reshape a
// checkpoint for another mesh, import a Hugging Face directory or a zaya GGUF
// file as a step-0 checkpoint, and compare two checkpoints tensor by tensor
// (exports: train/model_export.h). The tensors written follow the training
// schema (state_tensors.h), so a reshaped or imported checkpoint resumes like
// one the job wrote.

#include <string>
#include <vector>

#include "zaya/ckpt/reader.h"
#include "zaya/train/train_config.h"

namespace zaya {

// The training config a checkpoint was written with.
TrainConfig checkpoint_train_config(const CheckpointReader& ck);

// Writes OUT_ROOT/step_XXXXXXXX laid out for dp x ep ranks (errors name the
// flag); returns the directory written.
std::string reshape_checkpoint(const std::string& in, const std::string& out_root, int dp, int ep);

// A Hugging Face ZAYA1 directory or a zaya GGUF file (`in`) as the step-0
// checkpoint of a run of `config_path`, whose [model] must describe it; the
// weights only (optimizer state starts afresh). Without a config (empty
// `config_path`), the model's own config (config.json, or the GGUF file's) is
// recorded with default training settings: `zaya train --resume` checks only
// that its config's model is the same. Returns the directory written.
std::string import_checkpoint(const std::string& in, const std::string& out_root, const std::string& config_path);

// The training config an import without --config records for `model` (the
// preset that matches it, else "tiny" overridden key by key; default training
// settings; `tokenizer` as data.tokenizer, and a data.dir that says it is none).
TrainConfig imported_train_config(const ZayaConfig& model, const std::string& tokenizer, const std::string& source);

// Tensor by tensor: bitwise for float32 when tolerance is 0, else the largest
// absolute difference; weights_only ignores optimizer and controller state.
// Each side is a checkpoint, a model directory (config.json + safetensors,
// either layout, read as float32 under the legacy names a checkpoint uses) or
// a GGUF file; with a model directory or GGUF file on either side only the
// weights are compared (they hold no optimizer state), and `note` says so.
struct CheckpointComparison {
  std::vector<std::string> differences;  // one line per differing tensor
  std::string note;                      // how the two were compared, when not as given
  bool weights_only = false;             // as compared: asked for, or a side holds weights only
  int count() const { return int(differences.size()); }
};
CheckpointComparison compare_checkpoints(const std::string& a, const std::string& b, double tolerance,
                                         bool weights_only);

}  // namespace zaya
