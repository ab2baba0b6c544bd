// zaya profile's jobs that write a profile: a quick measurement saved by rank
// 0, and bench comm curves merged into a profile that is validated on saving.
#include "zaya/plan/profile_job.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "zaya/core/test_util.h"
#include "zaya/plan/builtin_profiles.h"

namespace zaya {
namespace {

using testing::expect_error;

// Two runs of `zaya bench comm --json`: reduce_scatter and all_gather on 2 ranks.
std::string bench_comm_doc() {
  auto run = [](const char* coll) {
    return nlohmann::json{{"collective", coll},
                          {"ranks", 2},
                          {"rows",
                           {{{"size", 1024}, {"out_of_place", {{"busbw_gbps", 0.5}}}, {"in_place", nullptr}},
                            {{"size", 1 << 20}, {"out_of_place", {{"busbw_gbps", 4.0}}}, {"in_place", nullptr}}}}};
  };
  return nlohmann::json{{"bench", "comm"}, {"format_version", 1}, {"runs", {run("reduce_scatter"), run("all_gather")}}}
      .dump();
}

TEST(ProfileJob, AddsCommCurvesFromFiles) {
  testing::TempDir dir;
  HardwareProfile p = *find_builtin_profile("h100");
  const size_t before = p.comm.size();
  const std::vector<CommCurve> curves = add_comm_file(p, dir.write("comm.json", bench_comm_doc()), "inter");
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].collective, "reduce_scatter");
  EXPECT_EQ(curves[0].scope, "inter");
  int merged = 0;
  for (const CommCurve& c : p.comm) merged += c.scope == "inter" && c.ranks == 2 && c.source == "measured";
  EXPECT_EQ(merged, 2);
  EXPECT_LE(p.comm.size(), before + 2);
  // The same file again replaces, not duplicates.
  const size_t after = p.comm.size();
  add_comm_file(p, dir.file("comm.json"), "inter");
  EXPECT_EQ(p.comm.size(), after);
  expect_error([&] { add_comm_file(p, dir.write("bad.json", "{"), "inter"); }, "bad.json: invalid JSON");
  expect_error([&] { add_comm_file(p, dir.write("gemm.json", R"({"bench": "gemm"})"), "inter"); },
               "not a `zaya bench comm --json` file");
}

TEST(ProfileJob, SavesOnlyValidProfiles) {
  testing::TempDir dir;
  HardwareProfile p = *find_builtin_profile("h200");
  const std::string path = dir.file("p.json");
  save_validated_profile(p, path);
  EXPECT_EQ(resolve_profile(path).name, "h200");
  p.memory_gib.value = 0;
  const std::string bad = dir.file("bad.json");
  expect_error([&] { save_validated_profile(p, bad); }, "bad.json: device.memory_gib.value = 0 is invalid");
  EXPECT_FALSE(std::filesystem::exists(bad));
}

TEST(ProfileJob, MeasurementSavedByRankZero) {
  auto world = make_self_comm();
  ProfileMeasureOptions o;
  o.quick = true;
  o.name = "profile-job";
  expect_error([&] { measure_profile_to_file(o, *world, ""); }, "zaya profile measure needs --out FILE");
  testing::TempDir dir;
  int lines = 0;
  const std::optional<HardwareProfile> p =
      measure_profile_to_file(o, *world, dir.file("m.json"), [&](const std::string&) { ++lines; });
  ASSERT_TRUE(p.has_value());
  EXPECT_GT(lines, 0);
  EXPECT_EQ(resolve_profile(dir.file("m.json")).name, "profile-job");
  EXPECT_EQ(p->peak_f32_gflops.source, "measured");
}

}  // namespace
}  // namespace zaya
