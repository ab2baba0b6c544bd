// zaya size's job: checking a config (which replaces --model), proposing for
// a target, the errors of each, and proposals saved as config.json files.
#include "zaya/plan/size_job.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"
#include "zaya/formats/hf_config.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using testing::expect_error;

SizeJobOptions on_mi300x() {
  SizeJobOptions o;
  o.common.profile = "mi300x-pollara";
  return o;
}

TEST(SizeJob, CheckReplacesTheModel) {
  SizeJobOptions o = on_mi300x();
  o.common.model = "tiny";
  o.check = "zaya1-base";
  SizeJobResult r = run_size_job(o);
  EXPECT_EQ(r.setup.config.hidden, preset_config("zaya1-base").hidden);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(r.proposals.empty());
  // A config with an off-multiple head dim is flagged.
  testing::TempDir dir;
  ZayaConfig c = preset_config("zaya1-base");
  c.head_dim = 96;
  const std::string path = dir.write("config.json", config_to_hf_json(c, "bfloat16").dump());
  o.check = path;
  r = run_size_job(o);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].field, "kv_channels (head_dim)");
  EXPECT_EQ(r.findings[0].suggested, 128);
  o.total = 1e9;
  expect_error([&] { run_size_job(o); }, "--check takes no target (--total/--active/--compute)");
}

TEST(SizeJob, ProposesForOneTarget) {
  SizeJobOptions o = on_mi300x();
  o.total = 8.8e9;
  o.count = 2;
  const SizeJobResult r = run_size_job(o);
  EXPECT_TRUE(r.findings.empty());
  ASSERT_FALSE(r.proposals.empty());
  EXPECT_LE(r.proposals.size(), 2u);
  EXPECT_NEAR(double(r.proposals[0].total_params), 8.8e9, 0.2 * 8.8e9);
  o.active = 1e8;
  expect_error([&] { run_size_job(o); }, "give exactly one target: --total, --active or --compute");
  o.total = o.active = 0;
  expect_error([&] { run_size_job(o); }, "give exactly one target");
}

TEST(SizeJob, SavesProposalsAsConfigJson) {
  testing::TempDir dir;
  const std::string out = dir.file("a/b");
  create_size_proposal_dir(out);
  ZayaConfig c = preset_config("small");
  c.hidden = 768;
  const std::string path = save_size_proposal(out, 3, c);
  EXPECT_EQ(path, out + "/proposal3.json");
  EXPECT_EQ(testing::read_file(path), config_to_hf_json(c, "bfloat16").dump(2) + "\n");
  EXPECT_EQ(load_hf_config(path).hidden, 768);
  const std::string file = dir.write("plain", "x");
  EXPECT_ANY_THROW(create_size_proposal_dir(file));  // a file where the directory should be
}

}  // namespace
}  // namespace zaya
