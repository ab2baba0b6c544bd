// zaya bench io's options: sizes with errors naming the flag, and the
// checkpoint --model stands for, split over --ranks shard files.
#include "zaya/bench/io_job.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"
#include "zaya/model/config.h"
#include "zaya/model/params.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(IoJob, SizesFromTheFlags) {
  IoJobOptions o;
  o.io.dir = "/somewhere";
  o.io.seed = 9;
  o.io.files = 2;
  IoJobPlan p = plan_io_job(o);
  EXPECT_FALSE(p.from_model);
  EXPECT_EQ(p.io.file_bytes, uint64_t(1) << 30);
  EXPECT_EQ(p.io.block_bytes, uint64_t(4) << 20);
  EXPECT_EQ(p.io.files, 2);
  EXPECT_EQ(p.io.dir, "/somewhere");
  EXPECT_EQ(p.io.seed, 9u);
  o.file_size = "0";  // no checkpoint test
  o.block_size = "64K";
  p = plan_io_job(o);
  EXPECT_EQ(p.io.file_bytes, 0u);
  EXPECT_EQ(p.io.block_bytes, 65536u);
  o.file_size = "1Z";
  expect_error([&] { plan_io_job(o); }, "--file-size");
  o.file_size = "1G";
  o.block_size = "";
  expect_error([&] { plan_io_job(o); }, "--block-size");
}

TEST(IoJob, ModelCheckpointInPageRoundedShards) {
  IoJobOptions o;
  o.model = "tiny";
  o.ranks = 3;
  o.io.files = 1;
  o.file_size = "5M";  // replaced by the model's checkpoint
  const IoJobPlan p = plan_io_job(o);
  const int64_t params = count_parameters(preset_config("tiny")).total;
  EXPECT_TRUE(p.from_model);
  EXPECT_EQ(p.model_params, params);
  EXPECT_EQ(p.checkpoint_bytes, uint64_t(params) * 12);
  EXPECT_EQ(p.io.files, 3);
  EXPECT_EQ(p.io.file_bytes % 4096, 0u);
  EXPECT_GE(p.io.file_bytes * 3, p.checkpoint_bytes);
  EXPECT_LT(p.io.file_bytes, p.checkpoint_bytes / 3 + 4096);
  o.model = "nosuch";
  expect_error([&] { plan_io_job(o); }, "--model 'nosuch' is neither a preset");
  o.model = "tiny";
  o.ranks = 0;
  expect_error([&] { plan_io_job(o); }, "--ranks = 0 is invalid");
}

}  // namespace
}  // namespace zaya
