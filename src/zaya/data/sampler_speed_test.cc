#include "zaya/data/sampler_speed.h"

#include <gtest/gtest.h>

#include <vector>

#include "zaya/data/shard_writer.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

TEST(SamplerSpeed, TimesWholeBatches) {
  testing::TempDir dir;
  {
    ShardWriter w(dir.file("s"), 1000);
    std::vector<int32_t> doc(100);
    for (int d = 0; d < 100; ++d) {
      for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int32_t>((d * 7 + i) % 1000);
      w.add_document(doc);
    }
    w.finish();
  }
  ShardReader shard = ShardReader::open(dir.file("s"));
  SamplerSpeed s = measure_sampler_speed(shard, {64, 3, 8, 0.05, true});
  EXPECT_GE(s.seconds, 0.05);
  EXPECT_GE(s.steps, 1);
  EXPECT_NEAR(s.tokens_per_second, s.steps * 3 * 64 / s.seconds, 1e-6 * s.tokens_per_second);
  EXPECT_NEAR(s.seconds_per_step * s.steps, s.seconds, 1e-9);
  testing::expect_data_error([&] { measure_sampler_speed(shard, {64, 0, 1, 1.0, false}); }, {"batch 0"});
}

}  // namespace
}  // namespace zaya
