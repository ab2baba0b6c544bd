// A two-phase recipe through the training job: the phase switch (sequence length,
// RoPE base, data mixture, schedule) and bit-exact resume before, at and after
// the phase boundary.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "zaya/ckpt/reader.h"
#include "zaya/core/fault.h"
#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/data/shard_writer.h"
#include "zaya/train/train_job.h"

namespace zaya {
namespace {

using testing::TempDir;

// Random tokens of a 256-id vocabulary, in documents of 40 tokens.
void write_split(const std::string& prefix, int64_t tokens, uint64_t seed) {
  ShardWriter w(prefix, 256);
  Rng rng{seed, 0, 0};
  std::vector<int32_t> doc;
  for (int64_t i = 0; i < tokens; ++i) {
    doc.push_back(int32_t(rng.next_below(256)));
    if (doc.size() == 40) {
      w.add_document(doc);
      doc.clear();
    }
  }
  w.add_document(doc);
  w.finish();
}

struct RecipeFixture {
  TempDir dir;
  RecipeFixture() {
    for (const char* name : {"a", "b"}) {
      std::filesystem::create_directories(dir.file(name));
      write_split(dir.file(name) + "/train", 4000, name[0]);
      write_split(dir.file(name) + "/val", 1000, name[0] + 100);
    }
  }
  // Phase 1: 4 steps of 2 x 32 tokens from a (weight 2) and b; phase 2: 3 steps of 2 x 64 tokens of b, RoPE base 1e5.
  TrainConfig config(const std::string& out) const {
    const std::string text = fmt::format(R"([model]
preset = "tiny"
num_blocks = 2
[train]
micro_batch = 2
eval_every = 0
eval_batches = 1
log_every = 1
out_dir = "{0}/{1}"
[checkpoint]
async = false
[[phase]]
name = "short"
tokens = 256
seq_len = 32
warmup_steps = 1
[[phase.data]]
dir = "{0}/a"
weight = 2
[[phase.data]]
dir = "{0}/b"
weight = 1
[[phase]]
name = "long"
tokens = 384
seq_len = 64
rope_theta = 100000
decay_fraction = 0.5
[[phase.data]]
dir = "{0}/b"
)",
                                         dir.path(), out);
    return parse_train_config(text, "recipe.toml");
  }
};

TrainJobOptions recipe_job_options(int64_t stop_at = 0) {
  TrainJobOptions o;
  o.quiet = true;
  o.peak_gflops = 100;  // skip the measurement
  o.stop_at = stop_at;
  return o;
}

std::vector<float> parameters(TrainJob& t) {
  const float* p = t.numerics().model().param_data();
  return std::vector<float>(p, p + t.numerics().model().params().total_floats());
}

int count_lines(const std::string& path, const std::string& needle) {
  int n = 0;
  std::istringstream in(testing::read_file(path));
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(RecipeTrainer, SwitchesPhasesAndResumesBitExactlyAcrossTheBoundary) {
  RecipeFixture f;
  const TrainConfig full_config = f.config("full");
  TrainJob full(full_config, recipe_job_options());
  ASSERT_EQ(full.phases().plans().size(), 2u);
  EXPECT_EQ(full.phases().plans()[1].first_step, 4);
  EXPECT_EQ(full.config().run.steps, 7);
  EXPECT_EQ(full.config().run.seq_len, 32);
  full.run();
  EXPECT_EQ(full.step(), 7);
  EXPECT_EQ(full.phases().phase(), 1u);
  EXPECT_EQ(full.config().run.seq_len, 64);
  EXPECT_DOUBLE_EQ(full.config().model.rope_theta, 100000);
  const std::vector<float> want = parameters(full);
  const std::string out = full_config.run.out_dir;
  // The final weights carry the last phase's RoPE base; metrics have one record per phase.
  EXPECT_NE(testing::read_file(out + "/final/config.json").find("\"rope_theta\": 100000"), std::string::npos);
  EXPECT_EQ(count_lines(out + "/metrics.jsonl", "\"phase\":"), 2);
  EXPECT_EQ(count_lines(out + "/metrics.jsonl", "{\"step\":5,\"phase\":2,\"name\":\"long\",\"steps\":3"), 1);
  // A validation at the end of each phase.
  EXPECT_EQ(count_lines(out + "/metrics.jsonl", "{\"step\":4,\"val_loss\""), 1);

  // Stop in the middle of phase 1, exactly at the boundary, and one step into phase 2; resume; same weights.
  for (int64_t stop : {2, 4, 5}) {
    SCOPED_TRACE("stopped at step " + std::to_string(stop));
    const TrainConfig c = f.config("split" + std::to_string(stop));
    {
      TrainJob first(c, recipe_job_options(stop));
      first.run();
      EXPECT_EQ(first.step(), stop);
    }
    TrainJob second(c, recipe_job_options());
    const std::vector<std::string> saved = list_checkpoints(c.checkpoint_dir());
    ASSERT_FALSE(saved.empty());
    const CheckpointReader ck = CheckpointReader::open(saved.back());
    EXPECT_EQ(ck.meta().state.at("recipe").at("phase").get<int>(), stop <= 4 ? 1 : 2);
    second.resume_from(ck);
    EXPECT_EQ(second.phases().phase(), stop <= 4 ? 0u : 1u);
    second.run();
    EXPECT_EQ(second.step(), 7);
    const std::vector<float> got = parameters(second);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
    EXPECT_EQ(count_lines(c.run.out_dir + "/metrics.jsonl", "\"phase\":"), 2);
  }
}

// A NaN step rolls back to the newest checkpoint: within a phase the data
// moves on past the bad step (the mixture's position is replayed); from a
// checkpoint of the previous phase the run re-enters the phase and completes.
TEST(RecipeTrainer, RollsBackWithinAndAcrossPhases) {
  RecipeFixture f;
  for (int64_t bad : {3, 6}) {
    SCOPED_TRACE("NaN at step " + std::to_string(bad));
    TrainConfig c = f.config("rollback" + std::to_string(bad));
    c.checkpoint.every = 2;
    c.ft.rollback_after = 1;
    set_fault_plan(fmt::format("nan:rank=0,step={}", bad));
    TrainJob t(c, recipe_job_options());
    t.run();
    set_fault_plan("");
    EXPECT_EQ(t.step(), 7);
    EXPECT_EQ(t.phases().phase(), 1u);
    EXPECT_EQ(count_lines(c.run.out_dir + "/incidents.jsonl", "\"event\":\"rollback\""), 1);
    // The phase records up to the checkpoint are kept, the phase entered again is logged again.
    EXPECT_EQ(count_lines(c.run.out_dir + "/metrics.jsonl", "\"phase\":"), 2);
  }
}

// The spike detector compares a step with the recent steps of its own phase:
// a new sequence length, RoPE base or mixture moves the loss and gradient
// norm by design (a full small-recipe run skipped the first long-context steps
// as "spikes" and gave up before this).
TEST(RecipeTrainer, SpikeDetectorStartsOverInEachPhase) {
  RecipeFixture f;
  TrainConfig c = f.config("spikes");
  TrainJob t(c, recipe_job_options(5));
  t.run();
  EXPECT_EQ(t.guard().window_steps(), 1);  // step 5 only: phase 2 began after step 4
  TrainJob u(c, recipe_job_options());
  u.resume_from(CheckpointReader::open(c.checkpoint_dir() + "/step_00000005"));
  u.run();
  EXPECT_EQ(u.guard().window_steps(), 3);  // steps 5..7, restored and continued
}

// A rollback from phase 2 to a checkpoint of phase 1 skips phase 2's bad
// batches when the run enters it again, as within a phase: the step after the
// checkpoint trains on other data than in a run without the fault.
TEST(RecipeTrainer, RollbackIntoAnEarlierPhaseSkipsTheBadBatches) {
  RecipeFixture f;
  TrainConfig clean = f.config("clean");
  clean.checkpoint.every = 4;
  TrainJob ref(clean, recipe_job_options());
  ref.run();
  TrainConfig c = f.config("faulty");
  c.checkpoint.every = 4;
  c.ft.rollback_after = 1;
  set_fault_plan("nan:rank=0,step=5");
  TrainJob t(c, recipe_job_options());
  t.run();
  set_fault_plan("");
  EXPECT_EQ(t.step(), 7);
  auto loss_at = [](const std::string& metrics, int64_t step) {
    std::istringstream in(testing::read_file(metrics));
    const std::string key = fmt::format("{{\"step\":{},\"loss\":", step);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size()));
    return -1.0;
  };
  const double want = loss_at(clean.run.out_dir + "/metrics.jsonl", 5);
  const double got = loss_at(c.run.out_dir + "/metrics.jsonl", 5);
  ASSERT_GT(want, 0);
  ASSERT_GT(got, 0);
  EXPECT_NE(got, want);  // step 5's batch (the bad one) was skipped
  EXPECT_EQ(count_lines(c.run.out_dir + "/incidents.jsonl", "\"event\":\"rollback\""), 1);
}

TEST(RecipeTrainer, RejectsDatasetsOfDifferentVocabularies) {
  RecipeFixture f;
  std::filesystem::create_directories(f.dir.file("c"));
  for (const char* split : {"train", "val"}) {
    ShardWriter w(f.dir.file("c") + "/" + split, 300);
    w.add_document(std::vector<int32_t>(500, 7));
    w.finish();
  }
  TrainConfig c = f.config("x");
  c.phases[1].data[0].dir = f.dir.file("c");
  const std::string e = testing::error_of([&] { TrainJob t(c, recipe_job_options()); });
  EXPECT_NE(e.find("must share one tokenizer"), std::string::npos) << e;
  EXPECT_NE(e.find(f.dir.file("c")), std::string::npos) << e;
  EXPECT_NE(e.find(f.dir.file("a")), std::string::npos) << e;
}

}  // namespace
}  // namespace zaya
