#include "zaya/plan/hardware_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "zaya/core/error.h"
#include "zaya/plan/builtin_profiles.h"

namespace zaya {
namespace {

std::string error_of(const nlohmann::json& j) {
  try {
    HardwareProfile::from_json(j, "p.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HardwareProfile, BuiltinsRoundTripThroughJson) {
  ASSERT_EQ(builtin_profiles().size(), 3u);
  for (const HardwareProfile& p : builtin_profiles()) {
    const HardwareProfile q = HardwareProfile::from_json(p.to_json(), "round trip");
    EXPECT_EQ(q.name, p.name);
    EXPECT_EQ(q.peak_bf16_gflops.value, p.peak_bf16_gflops.value);
    EXPECT_EQ(q.peak_bf16_gflops.source, "vendor");
    EXPECT_EQ(q.membw_gbps.source, "vendor");
    EXPECT_EQ(q.gemm_efficiency.source, "estimate");
    EXPECT_EQ(q.comm.size(), p.comm.size());
    EXPECT_EQ(q.to_json(), p.to_json());
  }
  const HardwareProfile* mi = find_builtin_profile("mi300x-pollara");
  ASSERT_NE(mi, nullptr);
  EXPECT_EQ(mi->devices_per_node, 8);
  EXPECT_EQ(mi->max_devices, 1024);
  EXPECT_EQ(mi->compute_units, 304);
}

TEST(HardwareProfile, SaveAndLoad) {
  const std::string path = (std::filesystem::temp_directory_path() / "zaya_profile_test.json").string();
  find_builtin_profile("h200")->save(path);
  const HardwareProfile p = HardwareProfile::load(path);
  EXPECT_EQ(p.name, "h200");
  EXPECT_EQ(resolve_profile(path).name, "h200");
  std::filesystem::remove(path);
}

TEST(HardwareProfile, BadInputNamesFileFieldAndAllowedValues) {
  const nlohmann::json good = find_builtin_profile("h100")->to_json();
  nlohmann::json j = good;
  j["device"]["membw_gbps"]["source"] = "guess";
  std::string e = error_of(j);
  EXPECT_NE(e.find("p.json: device.membw_gbps.source = 'guess'"), std::string::npos) << e;
  EXPECT_NE(e.find("vendor, measured, estimate"), std::string::npos) << e;
  j = good;
  j["device"].erase("stream_gbps");
  e = error_of(j);
  EXPECT_NE(e.find("device.stream_gbps is missing"), std::string::npos) << e;
  j = good;
  j["device"]["peak_gflops"]["bf16"]["value"] = -1;
  e = error_of(j);
  EXPECT_NE(e.find("peak_gflops.bf16.value = -1"), std::string::npos) << e;
  j = good;
  j["interconnect"][0]["points"] = {{1024, 1.0}, {512, 2.0}};
  e = error_of(j);
  EXPECT_NE(e.find("interconnect[0].points must be in ascending order"), std::string::npos) << e;
  j = good;
  j["interconnect"][0]["collective"] = "gossip";
  e = error_of(j);
  EXPECT_NE(e.find("all_reduce, reduce_scatter"), std::string::npos) << e;
  j = good;
  j["device"]["kind"] = "tpu";
  e = error_of(j);
  EXPECT_NE(e.find("allowed: gpu, cpu"), std::string::npos) << e;
  j = good;
  j["format_version"] = 7;
  EXPECT_NE(error_of(j).find("format_version"), std::string::npos);
}

TEST(HardwareProfile, UnknownNameListsTheBuiltins) {
  try {
    resolve_profile("tpu-v9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mi300x-pollara, h100, h200"), std::string::npos) << e.what();
  }
  const std::string path = (std::filesystem::temp_directory_path() / "zaya_profile_bad.json").string();
  std::ofstream(path) << "{not json";
  try {
    HardwareProfile::load(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace zaya
