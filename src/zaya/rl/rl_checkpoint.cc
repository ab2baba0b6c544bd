#include "zaya/rl/rl_checkpoint.h"

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/core/error.h"
#include "zaya/train/train_state.h"

namespace zaya {

CheckpointMeta rl_checkpoint_header(const TrainConfig& config, const StepNumerics& numerics, const PromptOrder& order,
                                    const RlProgress& progress) {
  CheckpointMeta header;
  header.state = {{"step", progress.step}};
  numerics.save_state(header.state);
  header.state["rl"] = {{"prompt_epochs", order.epochs()},
                        {"prompt_position", order.position()},
                        {"optimizer_steps", progress.optimizer_steps}};
  header.config_toml = train_config_to_toml(config);
  header.model_config = checkpoint_model_json(config.model);
  header.tokenizer = config.data.tokenizer;
  return header;
}

RlProgress read_rl_checkpoint(const TrainConfig& config, StepNumerics& numerics, PromptOrder& order,
                              const CheckpointReader& ck, bool note) {
  const nlohmann::json& st = ck.meta().state;
  ZAYA_CHECK(st.contains("rl") && st["rl"].is_object(),
             "{}: is not a `zaya rl` checkpoint (its state has no \"rl\" entry); to start RL from a trained model, "
             "set model.init_from to its final weights",
             ck.dir());
  const bool with_optimizer = read_numerics_state(config, numerics, ck, note);
  ZAYA_CHECK(with_optimizer, "{}: holds no optimizer state; a `zaya rl` checkpoint always does", ck.dir());
  numerics.load_state(st);
  const nlohmann::json& rl = st["rl"];
  RlProgress p;
  try {
    order.set_state(rl.at("prompt_epochs").get<uint64_t>(), rl.at("prompt_position").get<size_t>());
    p.optimizer_steps = rl.at("optimizer_steps").get<int64_t>();
    p.step = st.at("step").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail("{}/metadata.json: the RL state is malformed ({})", ck.dir(), e.what());
  }
  return p;
}

}  // namespace zaya
