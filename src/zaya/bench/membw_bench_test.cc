#include "zaya/bench/membw_bench.h"

#include <gtest/gtest.h>

#include "zaya/bench/stream.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

TEST(Membw, SweepsKernelsSizesAndThreads) {
  MembwOptions o;
  o.min_bytes = 16 << 10;
  o.max_bytes = 256 << 10;
  o.step_factor = 4;
  o.reps = 1;
  o.threads = {1};
  o.bytes_per_rep = 1 << 20;
  std::vector<MembwPoint> points = run_membw(o);
  ASSERT_EQ(points.size(), 5u * 3u);  // 5 kernels x (16K, 64K, 256K)
  for (const MembwPoint& p : points) {
    EXPECT_GT(p.best_gbps, 0) << p.kernel;
    EXPECT_GE(p.best_gbps, p.mean_gbps * 0.999) << p.kernel;
    EXPECT_LE(p.working_set, p.nominal);
    EXPECT_GT(p.working_set, p.nominal * 9 / 10);
  }
  EXPECT_EQ(points[0].passes, 64);  // 1 MiB of traffic over a 16 KiB working set
  EXPECT_EQ(points.back().kernel, "memcpy");
  nlohmann::json j = membw_json(o, points);
  EXPECT_EQ(j["points"].size(), 15u);
  o.kernels = {"stream"};
  testing::expect_error([&] { run_membw(o); }, "unknown kernel 'stream'");
  EXPECT_EQ(default_thread_counts(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(default_thread_counts(4), (std::vector<int>{1, 2, 4}));
}

TEST(Membw, StreamPassesCountEverySweep) {
  const StreamResult one = run_stream(StreamKernel::kTriad, 1000, 1, 3, 1);
  const StreamResult many = run_stream(StreamKernel::kTriad, 1000, 1, 3, 100);
  EXPECT_EQ(one.passes, 1);
  EXPECT_EQ(many.passes, 100);
}

// The inference roofline's probe: three arrays holding the working set, never under 24 MB.
TEST(Membw, WorkingSetProbeSizes) {
  EXPECT_EQ(working_set_stream_elements(1), int64_t(1) << 20);
  EXPECT_EQ(working_set_stream_elements(24 << 20), int64_t(1) << 20);
  EXPECT_EQ(working_set_stream_elements(int64_t(240) << 20), int64_t(10) << 20);
  EXPECT_EQ(working_set_stream_elements((int64_t(240) << 20) + 23), int64_t(10) << 20);
  EXPECT_GT(working_set_bandwidth_gbps(1), 0);
}

}  // namespace
}  // namespace zaya
