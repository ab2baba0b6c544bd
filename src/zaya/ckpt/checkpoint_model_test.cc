// The model a checkpoint holds, read without the trainer: from the recorded
// model config, or from the training config of older checkpoints.
#include "zaya/ckpt/checkpoint_model.h"

#include <gtest/gtest.h>

#include "zaya/ckpt/writer.h"
#include "zaya/core/test_util.h"
#include "zaya/dist/comm.h"
#include "zaya/formats/hf_config.h"
#include "zaya/model/config_toml.h"

namespace zaya {
namespace {

// Writes a checkpoint of `model` (weights only) with the given header fields.
std::string save(const std::string& root, const ZayaModel& model, CheckpointMeta header) {
  auto self = make_self_comm();
  CheckpointWriter w(*self, root, "run", 1, 1, {});
  std::vector<SnapshotTensor> tensors;
  for (const ParamTable* t : {&model.params(), &model.buffers()})
    for (const ParamEntry& e : t->entries())
      tensors.push_back({e.name, CkptDType::kF32, e.shape,
                         (t == &model.params() ? model.param_data() : model.buffer_data()) + e.offset});
  w.save(7, tensors, header, false);
  w.finish();
  return root + "/step_00000007";
}

ZayaConfig small_config() {
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 2;
  c.vocab_size = 384;
  c.real_vocab_size = 300;
  c.rope_theta = 123456.5;
  return c;
}

TEST(CheckpointModel, RecordedModelConfigRoundTripsExactly) {
  for (const std::string& preset : preset_names()) {
    const ZayaConfig c = preset_config(preset);
    const ZayaConfig back = config_from_hf_json(checkpoint_model_json(c), "test");
    EXPECT_EQ(config_to_hf_json(back, "float32"), config_to_hf_json(c, "float32")) << preset;
    EXPECT_EQ(back.real_vocab_size, c.real_vocab_size);
    EXPECT_EQ(back.router_norm_eps, c.router_norm_eps);
    EXPECT_EQ(back.rope_theta, c.rope_theta);
  }
}

TEST(CheckpointModel, ReadsTheRecordedModelOrTheTrainingConfigOfOlderCheckpoints) {
  testing::TempDir dir;
  const ZayaConfig c = small_config();
  ZayaModel model(c);
  model.init(5);
  CheckpointMeta recorded;
  recorded.state = {{"step", 7}};
  recorded.config_toml = "[data]\ntokenizer = \"not/this.model\"\n";  // the recorded fields win
  recorded.model_config = checkpoint_model_json(c);
  recorded.tokenizer = "tok.model";
  CheckpointMeta older;  // before the model was recorded: only the training config
  older.state = {{"step", 7}};
  older.config_toml = model_table_to_toml("tiny", c) + "[data]\ntokenizer = \"old/tok.model\"\n";
  for (const auto& [name, header, tokenizer] :
       {std::tuple{"recorded", recorded, "tok.model"}, std::tuple{"older", older, "old/tok.model"}}) {
    SCOPED_TRACE(name);
    const CheckpointReader ck = CheckpointReader::open(save(dir.file(name), model, header));
    EXPECT_EQ(config_to_hf_json(checkpoint_model_config(ck), "float32"), config_to_hf_json(c, "float32"));
    EXPECT_EQ(checkpoint_tokenizer(ck), tokenizer);
    const std::unique_ptr<ZayaModel> back = load_checkpoint_model(ck);
    EXPECT_EQ(std::memcmp(back->param_data(), model.param_data(), sizeof(float) * model.params().total_floats()), 0);
  }
}

TEST(CheckpointModel, MissingTensorNamesTheCheckpoint) {
  testing::TempDir dir;
  const ZayaConfig c = small_config();
  ZayaModel model(c);
  CheckpointMeta header;
  header.state = {{"step", 7}};
  ZayaConfig bigger = c;
  bigger.num_blocks = 3;  // the recorded config asks for a block the file lacks
  header.model_config = checkpoint_model_json(bigger);
  const std::string ck = save(dir.file("x"), model, header);
  testing::expect_error([&] { load_checkpoint_model(CheckpointReader::open(ck)); }, "missing tensor 'model.layers.4");
}

}  // namespace
}  // namespace zaya
