#include "zaya/bench/byte_size.h"

#include <gtest/gtest.h>

#include "zaya/bench/stats.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(ByteSize, ParsesNcclTestsSizes) {
  EXPECT_EQ(parse_byte_size("8", "-b"), 8u);
  EXPECT_EQ(parse_byte_size("32M", "-b"), 32u << 20);
  EXPECT_EQ(parse_byte_size("1.5K", "-b"), 1536u);
  EXPECT_EQ(parse_byte_size("4KiB", "-b"), 4096u);
  EXPECT_EQ(parse_byte_size("2g", "-b"), uint64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("64MB", "-b"), 64u << 20);
  EXPECT_EQ(parse_byte_size("1T", "-b"), uint64_t(1) << 40);
  expect_error([] { parse_byte_size("abc", "--minbytes"); }, "--minbytes = 'abc' is not a size");
  expect_error([] { parse_byte_size("3X", "-e"); }, "unknown unit 'X'");
  expect_error([] { parse_byte_size("-1", "-e"); }, "is not a size");
  EXPECT_EQ(byte_size_error("16M"), "");
  EXPECT_NE(byte_size_error("16Q"), "");
}

TEST(ByteSize, FormatsAndSweeps) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(4096), "4 KiB");
  EXPECT_EQ(format_bytes(1.5 * 1048576), "1.5 MiB");
  EXPECT_EQ(size_sweep(8, 128, 2, 0), (std::vector<uint64_t>{8, 16, 32, 64, 128}));
  EXPECT_EQ(size_sweep(8, 100, 4, 0), (std::vector<uint64_t>{8, 32}));
  EXPECT_EQ(size_sweep(1, 4, 1, 1), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(size_sweep(0, 4, 2, 0), (std::vector<uint64_t>{0, 1, 2, 4}));
  EXPECT_EQ(size_sweep(32, 32, 1, 1 << 20), (std::vector<uint64_t>{32}));
  expect_error([] { size_sweep(64, 8, 2, 0); }, "minbytes 64 > maxbytes 8");
  expect_error([] { size_sweep(1, 8, 1, 0); }, "stepbytes must be positive");
}

TEST(Stats, PercentilesAndVariation) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(double(i));
  SampleStats s = summarize(v);
  EXPECT_EQ(s.n, 100);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p99, 99);
  EXPECT_NEAR(s.cv, std::sqrt((100.0 * 100 - 1) / 12) / 50.5, 1e-12);
  SampleStats one = summarize({3.0});
  EXPECT_EQ(one.p99, 3.0);
  EXPECT_EQ(one.cv, 0.0);
  EXPECT_EQ(summarize({}).n, 0);
}

}  // namespace
}  // namespace zaya
