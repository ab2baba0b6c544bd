#pragma once
// The model a checkpoint holds, read without the training job: its config,
// the tokenizer its data was built with, and its weights. Inference
// (infer/), the checkpoint tools and the trainer's resume check use these, so
// that nothing but the trainer parses a training config.

#include <memory>
#include <string>

#include "zaya/ckpt/reader.h"
#include "zaya/model/model.h"

namespace zaya {

// metadata.json's "model" (a config.json in the legacy keys); checkpoints
// written before it existed carry only the training config, whose [model]
// table is read instead. Errors name `ck.dir()`.
ZayaConfig checkpoint_model_config(const CheckpointReader& ck);

// metadata.json's "tokenizer", or in older checkpoints the training config's
// data.tokenizer (empty when there is none).
std::string checkpoint_tokenizer(const CheckpointReader& ck);

// A model holding every expert, with every parameter and buffer read from the
// checkpoint (weights only: optimizer state is not read).
std::unique_ptr<ZayaModel> load_checkpoint_model(const CheckpointReader& ck);

// The training model (legacy semantics) of a training checkpoint
// (DIR/metadata.json), a zaya GGUF file (any regular file) or a legacy model
// directory: the full-sequence reference paths of `zaya generate` and `score`.
std::unique_ptr<ZayaModel> load_reference_model(const std::string& path);

// The "model" entry to record for a model config (checkpoint writers).
nlohmann::json checkpoint_model_json(const ZayaConfig& config);

}  // namespace zaya
