// The start-up shared by `zaya train` and `zaya bench train`, the resume walk
// past a damaged checkpoint, and the benchmark's body.
#include "zaya/train/job_start.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "zaya/core/test_util.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/model_directory.h"
#include "zaya/train/bench_train.h"

namespace zaya {
namespace {

TrainConfig small_job(const std::string& out_dir) {
  return parse_train_config(
      "[model]\npreset = \"tiny\"\nnum_blocks = 2\nvocab_size = 512\n[data]\ndir = \"-\"\n"
      "[train]\nseq_len = 16\nmicro_batch = 2\nsteps = 10\n[schedule]\nwarmup_steps = 1\n[checkpoint]\nasync = false\n",
      "job.toml", {"train.out_dir=" + out_dir});
}

TrainJobOptions synthetic() {
  TrainJobOptions o;
  o.synthetic_data = true;
  o.quiet = true;
  o.write_outputs = false;
  o.peak_gflops = 100;
  return o;
}

// model.init_from: a fresh run starts from a model directory's weights (either layout), step 0; a directory of
// another model is refused naming the key and both values.
TEST(JobStart, InitFromStartsFromAModelDirectorysWeights) {
  testing::TempDir dir;
  TrainConfig config = small_job(dir.file("run"));
  std::unique_ptr<TrainJob> first = start_train_job([&] { return config; }, synthetic());
  for (int step = 1; step <= 3; ++step) first->train_step();
  const ZayaModel& trained = first->numerics().model();
  save_hf_model(trained, dir.file("legacy"));
  save_native_tensors(trained.config(), complete_model_tensors(trained), dir.file("native"));
  for (const char* layout : {"legacy", "native"}) {
    TrainConfig again = small_job(dir.file(std::string("run_") + layout));
    again.init_from = dir.file(layout);
    std::unique_ptr<TrainJob> job = start_train_job([&] { return again; }, synthetic());
    const ZayaModel& m = job->numerics().model();
    EXPECT_EQ(job->step(), 0) << layout;
    EXPECT_TRUE(std::equal(m.param_data(), m.param_data() + m.params().total_floats(), trained.param_data())) << layout;
    EXPECT_TRUE(std::equal(m.buffer_data(), m.buffer_data() + m.buffers().total_floats(), trained.buffer_data()))
        << layout;
    // Without init_from the same config starts from the random initialisation.
    TrainJobOptions skip = synthetic();
    skip.init_weights = false;
    std::unique_ptr<TrainJob> fresh = start_train_job([&] { return again; }, skip);
    EXPECT_FALSE(
        std::equal(m.param_data(), m.param_data() + m.params().total_floats(), fresh->numerics().model().param_data()));
  }
  TrainConfig wider = small_job(dir.file("run_wider"));
  wider.model.hidden = 256;
  wider.init_from = dir.file("legacy");
  testing::expect_error([&] { start_train_job([&] { return wider; }, synthetic()); },
                        "model.init_from = '" + dir.file("legacy") + "' holds another model than [model]");
  testing::expect_error([&] { start_train_job([&] { return wider; }, synthetic()); }, "hidden_size: 256 vs 128");
  wider.init_from = dir.file("nothing");
  testing::expect_error([&] { start_train_job([&] { return wider; }, synthetic()); },
                        "is not a model directory (no config.json there)");
}

TEST(JobStart, InitFromIsAModelKeyWrittenBack) {
  const TrainConfig c =
      parse_train_config("[model]\npreset = \"tiny\"\ninit_from = \"runs/a/final\"\n[data]\ndir = \"-\"\n", "job.toml");
  EXPECT_EQ(c.init_from, "runs/a/final");
  EXPECT_EQ(parse_train_config(train_config_to_toml(c), "again.toml").init_from, "runs/a/final");
  EXPECT_EQ(parse_train_config("[model]\npreset = \"tiny\"\n[data]\ndir = \"-\"\n", "job.toml").init_from, "");
}

TEST(JobStart, ResumeLatestWalksPastADamagedCheckpointAndSetsItAside) {
  testing::TempDir dir;
  const TrainConfig config = small_job(dir.file("run"));
  {
    std::unique_ptr<TrainJob> job = start_train_job([&] { return config; }, synthetic());
    for (int step = 1; step <= 4; ++step) {
      job->train_step();
      if (step % 2 == 0) job->save_checkpoint(false);
    }
  }
  // Damage the newest checkpoint's shard: its checksums no longer match.
  const std::string newest = config.checkpoint_dir() + "/step_00000004";
  for (const auto& f : std::filesystem::directory_iterator(newest))
    if (f.path().extension() == ".bin") {
      std::fstream s(f.path(), std::ios::in | std::ios::out | std::ios::binary);
      s.seekp(200);
      s.write("\xde\xad\xbe\xef", 4);
    }
  std::unique_ptr<TrainJob> job = start_train_job([&] { return config; }, synthetic());
  const ResumeReport r = resume_train_job(*job, "latest");
  EXPECT_EQ(job->step(), 2);
  EXPECT_EQ(r.dir, config.checkpoint_dir() + "/step_00000002");
  ASSERT_EQ(r.damaged.size(), 1u);
  EXPECT_NE(r.damaged[0].find("step_00000004"), std::string::npos) << r.damaged[0];
  ASSERT_EQ(r.moved.size(), 1u);
  EXPECT_NE(r.moved[0].find("step_00000004.damaged"), std::string::npos) << r.moved[0];
  // A named checkpoint that does not load is an error, not a walk.
  std::unique_ptr<TrainJob> other = start_train_job([&] { return config; }, synthetic());
  testing::expect_error([&] { resume_train_job(*other, dir.file("nothing")); }, "nothing");
}

TEST(JobStart, AConfigErrorIsReportedByTheAgreement) {
  testing::expect_error([] { start_train_job([]() -> TrainConfig { fail("bad key"); }, synthetic()); }, "bad key");
}

TEST(BenchTrain, MeasuresTheTimedStepsOfTheRealJob) {
  testing::TempDir dir;
  BenchTrainOptions o;
  o.preset = "tiny";
  o.micro_batch = 2;
  o.seq_len = 16;
  o.steps = 3;
  o.warmup = 1;
  o.peak_gflops = 100;
  o.overrides = {"model.num_blocks=2"};
  o.checkpoint_dir = dir.file("ck");
  bool started = false;
  const BenchTrainResult r = bench_train(o, [&](const BenchTrainSetup& s) {
    started = true;
    EXPECT_EQ(s.world, 1);
    EXPECT_GT(s.params, s.active_params);
  });
  EXPECT_TRUE(started);
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].tokens, 3.0 * 2 * 16);  // the timed steps only
  EXPECT_GT(r.step_seconds(), 0);
  EXPECT_LE(r.ranks[0].best_step, r.step_seconds() + 1e-12);
  EXPECT_GT(r.workspace_bytes, 0);
  EXPECT_GT(r.peak_rss_bytes, r.workspace_bytes);
  const nlohmann::json j = bench_train_json(r);
  EXPECT_EQ(j["steps"], 3);
  EXPECT_EQ(j["ranks"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["tokens_per_second"].get<double>(), r.tokens_per_second());
}

}  // namespace
}  // namespace zaya
