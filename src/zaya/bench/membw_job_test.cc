// zaya bench membw's options and its table: columns per kernel x thread
// count, rows by position in the sweep.
#include "zaya/bench/membw_job.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(MembwJob, OptionsFromTheFlags) {
  MembwJobOptions o;
  MembwOptions m = membw_options(o);
  EXPECT_EQ(m.min_bytes, 16u << 10);
  EXPECT_EQ(m.max_bytes, uint64_t(2) << 30);
  EXPECT_EQ(m.kernels.size(), 5u);
  EXPECT_EQ(m.step_factor, 2u);
  EXPECT_EQ(m.reps, 5);
  o.kernels = {"triad"};
  o.threads = {3, 1};
  o.min_bytes = "1K";
  o.max_bytes = "1.5M";
  o.factor = 4;
  o.reps = 2;
  m = membw_options(o);
  EXPECT_EQ(m.kernels, std::vector<std::string>{"triad"});
  EXPECT_EQ(m.min_bytes, 1024u);
  EXPECT_EQ(m.max_bytes, 1572864u);
  EXPECT_EQ(m.step_factor, 4u);
  EXPECT_EQ(m.reps, 2);
  EXPECT_EQ(membw_thread_counts(m, 64), (std::vector<int>{3, 1}));
  m.threads.clear();
  EXPECT_EQ(membw_thread_counts(m, 6), default_thread_counts(6));
  o.min_bytes = "lots";
  expect_error([&] { membw_options(o); }, "--min-bytes");
  o.min_bytes = "1K";
  o.max_bytes = "2Q";
  expect_error([&] { membw_options(o); }, "--max-bytes");
}

MembwPoint point(const std::string& kernel, int threads, uint64_t nominal, double gbps) {
  MembwPoint p;
  p.kernel = kernel;
  p.threads = threads;
  p.nominal = nominal;
  p.working_set = nominal - 8;  // whole elements: not the nominal size
  p.best_gbps = gbps;
  return p;
}

TEST(MembwJob, TableColumnsAndRows) {
  // run_membw's order: kernel, then threads, then sizes.
  const std::vector<MembwPoint> points = {
      point("copy", 1, 1024, 1), point("copy", 1, 4096, 2), point("copy", 2, 1024, 3), point("copy", 2, 4096, 4),
      point("add", 1, 1024, 5),  point("add", 1, 4096, 6),  point("add", 2, 1024, 7)};  // one point missing
  const MembwTable t = membw_table(points, {"copy", "add"}, {1, 2});
  EXPECT_EQ(t.columns, (std::vector<std::string>{"copy/1t", "copy/2t", "add/1t", "add/2t"}));
  EXPECT_EQ(t.working_sets, (std::vector<uint64_t>{1024, 4096}));
  ASSERT_EQ(t.gbps.size(), 2u);
  EXPECT_EQ(t.gbps[0], (std::vector<double>{1, 3, 5, 7}));
  EXPECT_EQ(t.gbps[1], (std::vector<double>{2, 4, 6, 0}));
  expect_error([&] { membw_table({point("triad", 1, 1024, 1)}, {"copy"}, {1}); }, "triad/1t");
}

}  // namespace
}  // namespace zaya
