#include "zaya/train/train_state.h"

#include <fmt/format.h>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/core/error.h"
#include "zaya/formats/hf_config.h"
#include "zaya/train/train_fields.h"

namespace zaya {
namespace {

std::vector<StateTensor> rank_tensors(const TrainConfig& config, const StepNumerics& numerics, bool root,
                                      bool with_optimizer, StateUse use) {
  const ZayaModel& model = numerics.model();
  if (numerics.lora() != nullptr)
    return lora_state_tensors(model.config(), numerics.lora()->table(), model.buffers(), root, with_optimizer, use);
  return state_tensors(model.config(), model.params(), model.buffers(), numerics.optimizer().owned(),
                       config.optim.use_muon, root, with_optimizer, use);
}

}  // namespace

std::vector<SnapshotTensor> numerics_snapshot(const TrainConfig& config, StepNumerics& numerics, bool root) {
  std::vector<SnapshotTensor> out;
  for (const StateTensor& t : rank_tensors(config, numerics, root, true, StateUse::kWrite))
    out.push_back({t.name, t.dtype, t.shape, numerics.state_data(t)});
  return out;
}

std::vector<SnapshotTensor> state_snapshot(TrainStateParts p, bool root) {
  return numerics_snapshot(p.config, p.numerics, root);
}

CheckpointMeta state_header(TrainStateParts p, int64_t step) {
  CheckpointMeta header;
  header.state = {{"step", step}};
  p.numerics.save_state(header.state);
  p.guard.save_state(header.state);
  p.phases.save_state(header.state);
  header.config_toml = train_config_to_toml(p.config);
  header.model_config = checkpoint_model_json(p.config.model);
  header.tokenizer = p.config.data.tokenizer;
  return header;
}

bool read_numerics_state(const TrainConfig& config, StepNumerics& numerics, const CheckpointReader& ck, bool note) {
  const CheckpointMeta& meta = ck.meta();
  const ZayaConfig& current = numerics.model().config();
  // The model must be the same; everything else may change (layout, optimizer settings, out_dir...).
  const TrainConfig saved = parse_train_config(meta.config_toml, ck.dir() + "/metadata.json (config)");
  // The RoPE bases, their precision and the longest position shape no
  // parameter: a context extension changes them (a recipe phase sets its own
  // RoPE bases).
  ZayaConfig saved_model = saved.model;
  if (note && (saved_model.rope_theta != current.rope_theta || saved_model.max_position != current.max_position))
    fmt::print(
        "note: {} was trained with rope_theta {:g} and max_position_embeddings {}; continuing with {:g} and "
        "{}\n",
        ck.dir(), saved_model.rope_theta, saved_model.max_position, current.rope_theta, current.max_position);
  saved_model.rope_theta = current.rope_theta;
  saved_model.sliding_rope_theta = current.sliding_rope_theta;
  saved_model.rope_precision = current.rope_precision;
  saved_model.max_position = current.max_position;
  ZAYA_CHECK(config_to_hf_json(saved_model, "float32") == config_to_hf_json(current, "float32"),
             "{}: the checkpoint's model ({} preset, hidden {}, {} blocks, {} experts, vocab {}) differs from this "
             "config's; resume with the model it was trained with",
             ck.dir(), saved.model_preset, saved.model.hidden, saved.model.num_blocks, saved.model.experts,
             saved.model.vocab_size);
  // The adapters' shapes must be the same: the [lora] rows marked kResumeMatch (train_fields.cc).
  const LoraConfig &was = saved.lora, &is = config.lora;
  const std::vector<std::string> lora_diff =
      was.enabled && is.enabled ? field_differences(train_fields(), "lora", saved, config) : std::vector<std::string>{};
  ZAYA_CHECK(was.enabled == is.enabled && lora_diff.empty(),
             "{}: the checkpoint's LoRA adapters ({}) differ from this config's [lora] ({}); resume with the [lora] "
             "section it was trained with{}",
             ck.dir(), was.enabled ? fmt::format("rank {}, {} targets", was.rank, was.targets.size()) : "none",
             is.enabled ? fmt::format("rank {}, {} targets", is.rank, is.targets.size()) : "none",
             lora_diff.empty() ? "" : fmt::format(" ({})", fmt::join(lora_diff, "; ")));
  const bool with_optimizer = meta.state.value("optimizer_state", false);
  // Without optimizer state the moments start at zero.
  Optimizer& opt = numerics.optimizer();
  opt.first_moment().zero();
  opt.second_moment().zero();
  for (const StateTensor& t : rank_tensors(config, numerics, false, with_optimizer, StateUse::kRead))
    ck.read(t.name, numerics.state_data(t), t.dtype, t.shape);
  return with_optimizer;
}

StateOnDisk read_state(TrainStateParts p, const CheckpointReader& ck, bool note) {
  StateOnDisk s;
  s.with_optimizer = read_numerics_state(p.config, p.numerics, ck, note);
  const nlohmann::json& st = ck.meta().state;
  s.step = st.value("step", ck.meta().step);
  s.phase = p.phases.checkpoint_phase(st, s.step, ck.dir());
  return s;
}

void restore_state(TrainStateParts p, const nlohmann::json& state) {
  p.numerics.load_state(state);
  p.guard.load_state(state);
  p.phases.load_data_state(state);
}

}  // namespace zaya
