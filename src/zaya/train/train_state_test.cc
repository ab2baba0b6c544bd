// The train state: every component's state through save -> load, and through
// save -> offline reshape (dp 2 x ep 2) -> load, is exactly what was saved.
#include "zaya/train/train_state.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "zaya/core/test_util.h"
#include "zaya/train/checkpoint_tools.h"
#include "zaya/train/train_job.h"

namespace zaya {
namespace {

using testing::TempDir;

TrainConfig job_config(const std::string& out_dir) {
  // Step 3 is skipped (the guard then holds a consecutive skip), AdamW and Muon tensors, 4 experts.
  return parse_train_config(
      "[model]\npreset = \"tiny\"\nnum_blocks = 2\nvocab_size = 512\n[data]\ndir = \"-\"\n"
      "[train]\nseq_len = 16\nmicro_batch = 2\nsteps = 20\n[schedule]\nwarmup_steps = 2\n"
      "[ft]\nskip_steps = [4]\n[checkpoint]\nasync = false\n",
      "state.toml", {"train.out_dir=" + out_dir});
}

TrainJobOptions options() {
  TrainJobOptions o;
  o.synthetic_data = true;
  o.quiet = true;
  o.write_outputs = false;
  o.peak_gflops = 100;
  return o;
}

// Everything a job would write: its tensors' bytes by name, and the JSON state.
struct Captured {
  std::map<std::string, std::string> tensors;
  nlohmann::json state;
};

Captured capture(TrainJob& job) {
  const TrainStateParts parts = job.state_parts();
  Captured c;
  for (const SnapshotTensor& t : state_snapshot(parts, true)) {
    int64_t n = ckpt_dtype_bytes(t.dtype);
    for (int64_t d : t.shape) n *= d;
    c.tensors[t.name] = std::string(static_cast<const char*>(t.data), size_t(n));
  }
  c.state = state_header(parts, job.step()).state;
  return c;
}

void expect_same(const Captured& want, const Captured& got) {
  ASSERT_EQ(want.tensors.size(), got.tensors.size());
  for (const auto& [name, bytes] : want.tensors) {
    auto it = got.tensors.find(name);
    ASSERT_NE(it, got.tensors.end()) << name;
    EXPECT_TRUE(it->second == bytes) << name << " differs";
  }
  EXPECT_EQ(want.state, got.state);
}

TEST(TrainState, EveryComponentRoundTripsThroughSaveLoadAndReshape) {
  TempDir dir;
  const TrainConfig config = job_config(dir.file("run"));
  TrainJob job(config, options());
  for (int i = 0; i < 4; ++i) job.train_step();  // step 4 skipped by schedule
  ASSERT_EQ(job.guard().consecutive_skips(), 1);
  job.save_checkpoint(false);
  const Captured saved = capture(job);
  // Every component contributed: the numerics' step counts, the guard's window, the data position.
  EXPECT_EQ(saved.state["optimizer_step"], 3);
  EXPECT_EQ(saved.state["consecutive_skips"], 1);
  EXPECT_EQ(saved.state["loss_window"].size(), 3u);
  EXPECT_EQ(saved.state["data"]["index"], 4 * 2);                                      // 4 steps x 2 sequences
  EXPECT_TRUE(saved.tensors.count("optim.v.model.embed_tokens.weight"));               // AdamW
  EXPECT_TRUE(saved.tensors.count("optim.m.model.layers.0.self_attn.o_proj.weight"));  // Muon momentum
  EXPECT_FALSE(saved.tensors.count("optim.v.model.layers.0.self_attn.o_proj.weight"));
  EXPECT_TRUE(saved.tensors.count("balance.m"));
  const std::string ck = config.checkpoint_dir() + "/step_00000004";

  // save -> load
  TrainJob loaded(config, options());
  loaded.resume_from(CheckpointReader::open(ck));
  EXPECT_EQ(loaded.step(), 4);
  expect_same(saved, capture(loaded));

  // save -> reshape for dp 2 x ep 2 -> load on one rank
  const std::string reshaped = reshape_checkpoint(ck, dir.file("reshaped"), 2, 2);
  EXPECT_EQ(CheckpointReader::open(reshaped).meta().world, 4);
  TrainJob from_reshaped(config, options());
  from_reshaped.resume_from(CheckpointReader::open(reshaped));
  expect_same(saved, capture(from_reshaped));

  // And the loaded jobs continue exactly as the original.
  const StepResult a = job.train_step(), b = loaded.train_step(), c = from_reshaped.train_step();
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.loss, c.loss);
  EXPECT_EQ(a.grad_norm, b.grad_norm);
  expect_same(capture(job), capture(from_reshaped));
}

// A checkpoint records the model on its own (read without the training config).
TEST(TrainState, CheckpointsRecordTheModelAndTokenizer) {
  TempDir dir;
  TrainConfig config = job_config(dir.file("run"));
  config.data.tokenizer = "data/tok.model";
  TrainJob job(config, options());
  job.train_step();
  job.save_checkpoint(false);
  const CheckpointReader ck = CheckpointReader::open(config.checkpoint_dir() + "/step_00000001");
  EXPECT_FALSE(ck.meta().model_config.is_null());
  EXPECT_EQ(ck.meta().tokenizer, "data/tok.model");
}

}  // namespace
}  // namespace zaya
