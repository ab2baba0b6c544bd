#include "zaya/io/safetensors_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::error_of;
using testing::expect_error;

namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Five tensors: 64 + 16 + 48 + 8 (BF16) + 12 (I32) = 148 bytes of data.
struct Model {
  std::vector<float> emb = std::vector<float>(16, 0.5f);
  std::vector<float> norm = {1, 2, 3, 4};
  std::vector<float> proj = std::vector<float>(12, -1.25f);
  std::vector<float> gate = {0.5f, 1.5f, -2.0f, 8.0f};
  std::vector<int32_t> ids = {3, 1, 4};

  SafetensorsWriter writer() const {
    SafetensorsWriter w;
    w.set_metadata("format", "pt");
    w.add_f32("model.embed.weight", {4, 4}, emb.data());
    w.add_f32("model.norm.weight", {4}, norm.data());
    w.add_f32("model.proj.weight", {3, 4}, proj.data());
    w.add_bf16("model.gate.weight", {2, 2}, gate.data());
    w.add_i32("model.ids", {3}, ids.data());
    return w;
  }

  void expect_read_back(const SafetensorsDir& d) const {
    std::vector<float> f(16);
    d.read_f32("model.embed.weight", f.data(), {4, 4});
    EXPECT_EQ(f, emb);
    d.read_f32("model.norm.weight", f.data(), {4});
    EXPECT_EQ(std::vector<float>(f.begin(), f.begin() + 4), norm);
    d.read_f32("model.proj.weight", f.data(), {3, 4});
    EXPECT_EQ(std::vector<float>(f.begin(), f.begin() + 12), proj);
    d.read_f32("model.gate.weight", f.data(), {2, 2});
    EXPECT_EQ(std::vector<float>(f.begin(), f.begin() + 4), gate);  // all exact in BF16
    std::vector<int32_t> i(3);
    d.read_i32("model.ids", i.data(), {3});
    EXPECT_EQ(i, ids);
  }
};

TEST(SafetensorsDir, ShardedRoundTrip) {
  testing::TempDir dir;
  Model m;
  write_sharded(dir.path(), m.writer(), 80);
  // Greedy in insertion order: [emb 64, norm 16] [proj 48, gate 8, ids 12].
  EXPECT_TRUE(fs::exists(dir.file("model-00001-of-00002.safetensors")));
  EXPECT_TRUE(fs::exists(dir.file("model-00002-of-00002.safetensors")));
  EXPECT_FALSE(fs::exists(dir.file("model.safetensors")));

  nlohmann::json index = read_json(dir.file(kSafetensorsIndexFile));
  EXPECT_EQ(index["metadata"]["total_size"], 148);
  EXPECT_EQ(index["weight_map"]["model.embed.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["model.ids"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"].size(), 5u);

  SafetensorsDir d = SafetensorsDir::open(dir.path());
  EXPECT_EQ(d.shards().size(), 2u);
  EXPECT_EQ(d.names().size(), 5u);
  EXPECT_TRUE(d.has("model.gate.weight"));
  EXPECT_EQ(d.info("model.gate.weight").dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(d.file_of("model.ids").metadata().at("format"), "pt");
  m.expect_read_back(d);
  expect_error([&] { d.info("nope"); }, "no tensor named 'nope'");
}

TEST(SafetensorsDir, OversizedTensorGetsItsOwnShard) {
  SafetensorsWriter w = Model().writer();
  std::vector<SafetensorsWriter> shards = w.split(40);
  // [emb 64] [norm 16] [proj 48] [gate 8, ids 12]
  ASSERT_EQ(shards.size(), 4u);
  EXPECT_EQ(shards[0].data_bytes(), 64u);
  EXPECT_EQ(shards[2].tensors()[0].name, "model.proj.weight");
  EXPECT_EQ(shards[3].tensors().size(), 2u);
  EXPECT_EQ(shards[3].data_bytes(), 20u);
  for (const auto& s : shards) EXPECT_EQ(s.metadata().at("format"), "pt");
  EXPECT_THROW(w.split(0), Error);
}

TEST(SafetensorsDir, SingleFileWhenItFits) {
  testing::TempDir dir;
  Model m;
  write_sharded(dir.path(), m.writer(), 80);  // sharded first, leaving an index
  write_sharded(dir.path(), m.writer(), 1000);
  EXPECT_TRUE(fs::exists(dir.file("model.safetensors")));
  EXPECT_FALSE(fs::exists(dir.file(kSafetensorsIndexFile)));  // stale index removed
  SafetensorsDir d = SafetensorsDir::open(dir.path());
  EXPECT_EQ(d.shards().size(), 1u);
  EXPECT_EQ(d.names(), (std::vector<std::string>{"model.embed.weight", "model.norm.weight", "model.proj.weight",
                                                 "model.gate.weight", "model.ids"}));
  m.expect_read_back(d);
  // A path to a single file works too.
  m.expect_read_back(SafetensorsDir::open(dir.file("model.safetensors")));
}

class SafetensorsDirIndex : public ::testing::Test {
 protected:
  void SetUp() override { write_sharded(dir.path(), Model().writer(), 80); }

  void write_index(const nlohmann::json& index) const {
    std::ofstream(dir.file(kSafetensorsIndexFile)) << index.dump();
  }
  nlohmann::json index() const { return read_json(dir.file(kSafetensorsIndexFile)); }
  std::string open_error() const {
    return error_of([&] { SafetensorsDir::open(dir.path()); });
  }

  testing::TempDir dir;
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";
};

TEST_F(SafetensorsDirIndex, MissingShardFile) {
  fs::remove(dir.file(shard2));
  EXPECT_NE(open_error().find("shard '" + shard2 + "' (listed for tensor"), std::string::npos) << open_error();
}

TEST_F(SafetensorsDirIndex, TensorListedButAbsent) {
  auto idx = index();
  idx["weight_map"]["model.norm.weight"] = shard2;
  write_index(idx);
  EXPECT_NE(open_error().find("tensor 'model.norm.weight' is listed in the index but absent from shard"),
            std::string::npos)
      << open_error();
}

TEST_F(SafetensorsDirIndex, TensorNotListed) {
  auto idx = index();
  idx["weight_map"].erase("model.ids");
  write_index(idx);
  EXPECT_NE(open_error().find("contains tensor 'model.ids', which the index does not list"), std::string::npos)
      << open_error();
}

TEST_F(SafetensorsDirIndex, TensorInTwoShards) {
  // Rewrite shard 2 so that it also holds model.norm.weight.
  std::vector<float> norm = {1, 2, 3, 4}, proj(12), gate(4);
  std::vector<int32_t> ids(3);
  SafetensorsWriter w;
  w.add_f32("model.proj.weight", {3, 4}, proj.data());
  w.add_bf16("model.gate.weight", {2, 2}, gate.data());
  w.add_i32("model.ids", {3}, ids.data());
  w.add_f32("model.norm.weight", {4}, norm.data());
  w.write(dir.file(shard2));
  EXPECT_NE(open_error().find("tensor 'model.norm.weight' is present in two shards"), std::string::npos)
      << open_error();
}

TEST_F(SafetensorsDirIndex, MalformedIndexes) {
  write_index({{"metadata", {}}});
  EXPECT_NE(open_error().find("missing field 'weight_map'"), std::string::npos) << open_error();
  write_index({{"weight_map", {1, 2}}});
  EXPECT_NE(open_error().find("'weight_map' is a JSON array"), std::string::npos) << open_error();
  write_index({{"weight_map", {{"model.ids", 3}}}});
  EXPECT_NE(open_error().find("weight_map entry for tensor 'model.ids' is a JSON number"), std::string::npos)
      << open_error();
  write_index({{"weight_map", {{"model.ids", "../" + shard2}}}});
  EXPECT_NE(open_error().find("not a file name in the directory"), std::string::npos) << open_error();
  write_index(nlohmann::json::array());
  EXPECT_NE(open_error().find("top level is a JSON array"), std::string::npos) << open_error();
  std::ofstream(dir.file(kSafetensorsIndexFile)) << "{\"weight_map\": ";
  EXPECT_NE(open_error().find("invalid JSON"), std::string::npos) << open_error();
}

TEST(SafetensorsDir, EmptyOrMissingDirectory) {
  testing::TempDir dir;
  expect_error([&] { SafetensorsDir::open(dir.path()); }, "neither model.safetensors.index.json nor");
  expect_error([&] { SafetensorsDir::open(dir.file("nope")); }, "no such file or directory");
}

}  // namespace
}  // namespace zaya
