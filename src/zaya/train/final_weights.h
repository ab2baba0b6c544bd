#pragma once
// The final weights of a run as a Hugging Face-style model directory
// (config.json + model.safetensors, legacy names, model/hf_checkpoint.h),
// written by rank 0. Under expert parallelism every rank's experts are
// gathered first (collective on all ranks), and the file lists the tensors in
// the canonical order of a full table, so it is the same whatever ep was.

#include <string>

#include "zaya/dist/mesh.h"
#include "zaya/model/model.h"

namespace zaya {

// `config`: the model's config as trained last (a recipe's last RoPE base);
// dtype: f32 or bf16.
void save_final_weights(const ZayaModel& model, const ZayaConfig& config, ProcessMesh& mesh, const std::string& dir,
                        const std::string& dtype);

}  // namespace zaya
