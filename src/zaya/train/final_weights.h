#pragma once
// The final weights of a run as a Hugging Face-style model directory
// (config.json + model.safetensors, legacy or native names, formats/model_directory.h),
// written by rank 0. Under expert parallelism every rank's experts are
// gathered first (collective on all ranks), and the file lists the tensors in
// the canonical order of a full table, so it is the same whatever ep was.

#include <string>

#include "zaya/dist/mesh.h"
#include "zaya/formats/model_directory.h"
#include "zaya/model/model.h"

namespace zaya {

// `config`: the model's config as trained last (a recipe's last RoPE base);
// dtype: f32 or bf16; layout: legacy or native. The native layout is refused
// (on every rank, before anything is written) where the trained balancing
// biases let the skip expert be chosen (native_export_problem).
void save_final_weights(const ZayaModel& model, const ZayaConfig& config, ProcessMesh& mesh, const std::string& dir,
                        const std::string& dtype, DirectoryLayout layout = DirectoryLayout::kLegacy);

}  // namespace zaya
