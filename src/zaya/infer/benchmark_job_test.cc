// zaya bench infer's model choice (a preset's random weights or a directory,
// with its errors), its switches on the benchmark options, and the JSON's name.
#include "zaya/infer/benchmark_job.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/infer/test_util.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_q8.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(InferBenchJob, PresetOrDirectoryExactlyOne) {
  InferBenchJobOptions o;
  expect_error([&] { open_infer_bench_model(o); }, "give exactly one of --preset and --model");
  o.preset = "tiny";
  o.model = "dir";
  expect_error([&] { open_infer_bench_model(o); }, "give exactly one of --preset and --model");
  o.model.clear();
  o.dtype = "nf4";
  expect_error([&] { open_infer_bench_model(o); }, "--dtype 'nf4' is invalid; allowed: auto, bf16, f32");
  o.dtype = "bf16";
  o.preset = "zaya1-base";
  expect_error([&] { open_infer_bench_model(o); }, "--preset zaya1-base: random weights of 8.8B parameters");
  o.preset = "huge";
  expect_error([&] { open_infer_bench_model(o); }, "huge");
  o.preset.clear();
  testing::TempDir dir;
  o.model = dir.file("nosuch");
  expect_error([&] { open_infer_bench_model(o); }, "nosuch/config.json");
}

TEST(InferBenchJob, PresetWeightsAreSeeded) {
  InferBenchJobOptions o;
  o.preset = "tiny";
  o.dtype = "f32";
  o.bench.seed = 5;
  const InferBenchModel a = open_infer_bench_model(o), b = open_infer_bench_model(o);
  ASSERT_NE(a.random, nullptr);
  EXPECT_EQ(a.name, "preset tiny");
  EXPECT_EQ(a.model->matrix_dtype(), "f32");
  EXPECT_EQ(a.model->config().hidden, preset_config("tiny").hidden);
  const size_t n = size_t(a.random->params().total_floats());
  EXPECT_EQ(std::vector<float>(a.random->param_data(), a.random->param_data() + n),
            std::vector<float>(b.random->param_data(), b.random->param_data() + n));
  o.bench.seed = 6;
  o.dtype = "bf16";
  const InferBenchModel c = open_infer_bench_model(o);
  EXPECT_EQ(c.model->matrix_dtype(), "bf16");
  EXPECT_NE(std::vector<float>(a.random->param_data(), a.random->param_data() + n),
            std::vector<float>(c.random->param_data(), c.random->param_data() + n));
}

TEST(InferBenchJob, OpensADirectory) {
  auto saved = testing::random_model(testing::small_test_config(), 7);
  testing::TempDir dir;
  save_hf_model(*saved, dir.path());
  InferBenchJobOptions o;
  o.model = dir.path();
  o.dtype = "auto";
  o.lora_adapters = 2;
  o.lora_rank = 4;
  const InferBenchModel m = open_infer_bench_model(o);
  ASSERT_EQ(m.loras.size(), 2u);  // the adapters of --lora-adapters, bound for the decode points
  EXPECT_EQ(m.loras[1]->config().rank, 4);
  EXPECT_EQ(infer_bench_options(o, m).loras, (std::vector<const LoraAdapters*>{m.loras[0].get(), m.loras[1].get()}));
  EXPECT_EQ(m.random, nullptr);
  EXPECT_EQ(m.name, dir.path());
  EXPECT_EQ(m.model->config().hidden, 64);
  InferBenchResult r;
  r.dram_gbps = 12.5;
  const nlohmann::json j = infer_bench_job_json(m, infer_bench_options(o, m), r);
  EXPECT_EQ(j["lora_adapters"], 2);
  EXPECT_EQ(j["model"], dir.path());
  EXPECT_EQ(j["bench"], "infer");
  EXPECT_EQ(j["dram_gbps"], 12.5);
  EXPECT_EQ(j["matvec_kernel"], matvec_kernel_name());
  EXPECT_EQ(j["int8_matvec_kernel"], matvec_q8_kernel_name());
}

TEST(InferBenchJob, SwitchesOnTheBenchmarkOptions) {
  InferBenchJobOptions o;
  o.bench.decode_steps = 3;
  const InferBenchModel none;
  InferBenchOptions b = infer_bench_options(o, none);
  EXPECT_TRUE(b.loras.empty());
  EXPECT_TRUE(b.bf16_activations);
  EXPECT_TRUE(b.working_set_roofline);
  EXPECT_EQ(b.prefill_lengths, o.bench.prefill_lengths);
  EXPECT_EQ(b.batches, o.bench.batches);
  EXPECT_EQ(b.decode_steps, 3);
  o.exact = o.no_working_set = o.no_prefill = o.no_decode = true;
  b = infer_bench_options(o, none);
  EXPECT_FALSE(b.bf16_activations);
  EXPECT_FALSE(b.working_set_roofline);
  EXPECT_TRUE(b.prefill_lengths.empty());
  EXPECT_TRUE(b.batches.empty());
  EXPECT_EQ(b.contexts, o.bench.contexts);  // decode points are dropped by their batches
}

}  // namespace
}  // namespace zaya
