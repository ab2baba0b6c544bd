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
// weights only (optimizer state starts afresh). Returns the directory written.
std::string import_checkpoint(const std::string& in, const std::string& out_root, const std::string& config_path);

// Tensor by tensor: bitwise for float32 when tolerance is 0, else the largest
// absolute difference; weights_only ignores optimizer and controller state.
struct CheckpointComparison {
  std::vector<std::string> differences;  // one line per differing tensor
  int count() const { return int(differences.size()); }
};
CheckpointComparison compare_checkpoints(const std::string& a, const std::string& b, double tolerance,
                                         bool weights_only);

}  // namespace zaya
