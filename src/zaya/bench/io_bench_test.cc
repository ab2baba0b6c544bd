#include <gtest/gtest.h>

#include <cmath>

#include "zaya/bench/io_bench.h"
#include "zaya/bench/io_model.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

// The ZAYA1 numbers of docs/systems-notes.md §3.
TEST(StorageModel, ReproducesTheZaya1Numbers) {
  StorageModelInput in;  // G = s = 4096, b = 4, P = 4096, t = 2.5, I_max = 70000
  StorageModel m = storage_model(in);
  EXPECT_EQ(m.bytes_per_step, 64.0 * 1024 * 1024);
  EXPECT_EQ(m.ideal_pages_per_step, 16384);
  EXPECT_NEAR(m.required_iops, 6553.6, 1e-9);
  EXPECT_NEAR(m.break_even_seconds, 0.234, 0.0005);
  EXPECT_TRUE(m.storage_safe);
  in.sigma = 8;
  m = storage_model(in);
  EXPECT_NEAR(m.break_even_seconds, 8 * 0.23406, 0.001);
  EXPECT_TRUE(m.storage_safe);  // "stays above break-even even at sigma = 8"
  in.step_seconds = 1.0;
  EXPECT_FALSE(storage_model(in).storage_safe);
  EXPECT_DOUBLE_EQ(scatter_factor_from_extra_faults(1, 4096, 4, 4096), 1.25);
  in.sigma = 0.5;
  testing::expect_error([&] { storage_model(in); }, "scatter factor must be at least 1");
}

TEST(StorageModel, SigmaTableVariesOnlySigma) {
  StorageModelInput in;
  in.sigma = 3;  // the measured one is not in the table
  in.step_seconds = 1.0;
  const std::vector<StorageModelAtSigma> t = storage_model_sigma_table(in);
  ASSERT_EQ(t.size(), 4u);
  const double sigmas[] = {1, 2, 4, 8};
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].sigma, sigmas[i]);
    StorageModelInput x = in;
    x.sigma = sigmas[i];
    EXPECT_DOUBLE_EQ(t[i].model.required_iops, storage_model(x).required_iops);
    EXPECT_NEAR(t[i].model.break_even_seconds, sigmas[i] * 16384 / 70000.0, 1e-12);
  }
  // ZAYA1's step at 1 s: safe up to sigma 4, storage-bound at 8 (t_break = 0.234 sigma s).
  EXPECT_TRUE(t[2].model.storage_safe);
  EXPECT_FALSE(t[3].model.storage_safe);
}

TEST(StorageModel, PagesTouched) {
  EXPECT_EQ(pages_touched(0, 4096, 4096), 1);
  EXPECT_EQ(pages_touched(0, 4097, 4096), 2);
  EXPECT_EQ(pages_touched(4095, 2, 4096), 2);
  EXPECT_EQ(pages_touched(16384, 16388, 4096), 5);  // a sampler window of 4096 + 1 uint32 tokens
  EXPECT_EQ(pages_touched(10, 0, 4096), 0);
}

// A small end-to-end run on a temporary directory: every phase runs and the
// sample pass sees the extra page of the (seq + 1)-token windows.
TEST(IoBench, RunsEveryPhaseOnATemporaryDirectory) {
  testing::TempDir dir;
  IoBenchOptions o;
  o.dir = dir.path();
  o.file_bytes = 4 << 20;
  o.files = 2;
  o.block_bytes = 1 << 20;
  o.page_reads = 200;
  o.samples = 50;
  o.seq_len = 1024;  // 4 KiB windows + 4 bytes: 2 pages each
  o.batch = 64;
  o.step_seconds = 1;
  const IoBenchResult r = run_io_bench(o);
  EXPECT_TRUE(r.write.ran);
  EXPECT_GT(r.write.gbps, 0);
  EXPECT_GT(r.read.gbps, 0);
  EXPECT_EQ(r.pages.reads, 200);
  EXPECT_GT(r.pages.iops, 0);
  ASSERT_TRUE(r.samples.ran);
  EXPECT_EQ(r.samples.samples, 50);
  EXPECT_NEAR(r.samples.ideal_pages, 1.0, 1e-12);
  EXPECT_NEAR(r.samples.pages_touched, 2.0, 1e-12);
  EXPECT_GE(r.samples.sigma, 1.0);
  EXPECT_NEAR(r.model.bytes_per_step, 64.0 * 1024 * 4, 1e-9);
  const nlohmann::json j = io_bench_json(o, r);
  EXPECT_EQ(j["bench"], "io");
  EXPECT_EQ(j["storage_model"]["by_sigma"].size(), 4u);
  // The written files are gone.
  int left = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) left += e.is_regular_file();
  EXPECT_EQ(left, 0);
  o.dataset = dir.file("missing");
  testing::expect_error([&] { run_io_bench(o); }, "neither it nor");
}

}  // namespace
}  // namespace zaya
