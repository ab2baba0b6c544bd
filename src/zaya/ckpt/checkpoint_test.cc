// Checkpoint files: a save/load round trip through the writer and reader on
// one rank, and every kind of damage turning into a clear error.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <vector>

#include "zaya/ckpt/offline.h"
#include "zaya/ckpt/reader.h"
#include "zaya/ckpt/writer.h"
#include "zaya/core/fault.h"
#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct Saved {
  std::vector<float> a = std::vector<float>(1000), b = std::vector<float>(37);
  std::vector<double> c = std::vector<double>(6);
  Saved() {
    fill_normal(a.data(), a.size(), 0, 1, 1, 1);
    fill_normal(b.data(), b.size(), 0, 1, 1, 2);
    for (size_t i = 0; i < c.size(); ++i) c[i] = 0.5 * double(i);
  }
  std::vector<SnapshotTensor> tensors() const {
    return {{"a", CkptDType::kF32, {10, 100}, a.data()},
            {"b", CkptDType::kF32, {37}, b.data()},
            {"c", CkptDType::kF64, {2, 3}, c.data()}};
  }
};

CheckpointMeta header(nlohmann::json state, std::string config_toml = "") {
  CheckpointMeta h;
  h.state = std::move(state);
  h.config_toml = std::move(config_toml);
  return h;
}

std::string save_one(const std::string& root, int64_t step, bool async, RetentionPolicy keep = {}) {
  auto self = make_self_comm();
  CheckpointWriter w(*self, root, "run-1", 1, 1, keep);
  Saved s;
  w.save(step, s.tensors(), header({{"step", step}, {"note", "hello"}}, "[data]\ndir = \"x\"\n"), async);
  w.finish();
  return (fs::path(root) / checkpoint_dir_name(step)).string();
}

TEST(Checkpoint, RoundTripAsyncAndSync) {
  TempDir tmp;
  for (bool async : {true, false}) {
    const std::string root = tmp.file(async ? "async" : "sync");
    const std::string dir = save_one(root, 7, async);
    CheckpointReader r = CheckpointReader::open(dir);
    EXPECT_EQ(r.meta().step, 7);
    EXPECT_EQ(r.meta().run_id, "run-1");
    EXPECT_EQ(r.meta().state["note"], "hello");
    Saved want;
    std::vector<float> a(1000);
    r.read("a", a.data(), CkptDType::kF32, {10, 100});
    EXPECT_EQ(a, want.a);
    std::vector<double> c(6);
    r.read("c", c.data(), CkptDType::kF64, {2, 3});
    EXPECT_EQ(c, want.c);
    EXPECT_GT(r.verify(), 4000u);
    // Nothing partial is left behind.
    for (const auto& e : fs::directory_iterator(root)) EXPECT_EQ(e.path().filename().string()[0], 's');
  }
}

TEST(Checkpoint, RetentionKeepsNewestAndPermanent) {
  TempDir tmp;
  RetentionPolicy keep;
  keep.keep_last = 2;
  keep.keep_every = 10;
  auto self = make_self_comm();
  CheckpointWriter w(*self, tmp.path(), "run", 1, 1, keep);
  Saved s;
  for (int64_t step : {5, 10, 15, 20, 25, 30, 35}) w.save(step, s.tensors(), header({{"step", step}}), true);
  w.finish();
  std::vector<std::string> names;
  for (const std::string& d : list_checkpoints(tmp.path())) names.push_back(fs::path(d).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"step_00000010", "step_00000020", "step_00000030", "step_00000035"}));
}

TEST(Checkpoint, DamageIsAClearError) {
  TempDir tmp;
  const std::string dir = save_one(tmp.path(), 3, false);
  const std::string shard = (fs::path(dir) / "shard-00000-of-00001.bin").string();
  const std::string meta = (fs::path(dir) / kCheckpointMetadata).string();
  const std::string original_meta = testing::read_file(meta), original_shard = testing::read_file(shard);
  std::vector<float> a(1000);
  // A flipped byte: the checksum of the slice that holds it fails, naming tensor and file.
  std::string flipped = original_shard;
  flipped[100] ^= 0x40;
  testing::write_file(shard, flipped);
  testing::expect_error(
      [&] {
        CheckpointReader::open(dir).read("a", a.data(), CkptDType::kF32, {10, 100});
      },
      "checksum mismatch in tensor 'a'");
  testing::expect_error([&] { CheckpointReader::open(dir).verify(); }, "checksum mismatch");
  // A truncated shard.
  testing::write_file(shard, original_shard.substr(0, 500));
  testing::expect_error([&] { CheckpointReader::open(dir); }, "truncated or replaced");
  testing::write_file(shard, original_shard);
  // Wrong shape or dtype requested.
  testing::expect_error(
      [&] {
        CheckpointReader::open(dir).read("a", a.data(), CkptDType::kF32, {100, 10});
      },
      "has shape [10, 100], expected [100, 10]");
  testing::expect_error(
      [&] {
        CheckpointReader::open(dir).read("c", a.data(), CkptDType::kF32, {2, 3});
      },
      "tensor 'c' is F64, expected F32");
  testing::expect_error([&] { CheckpointReader::open(dir).read("nope", a.data(), CkptDType::kF32, {1}); },
                        "no tensor 'nope'");
  // Inconsistent metadata.
  auto with = [&](const std::string& from, const std::string& to) {
    std::string m = original_meta;
    const size_t at = m.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    m.replace(at, from.size(), to);
    testing::write_file(meta, m);
  };
  with("\"format\": \"zaya-checkpoint\"", "\"format\": \"other\"");
  testing::expect_error([&] { CheckpointReader::open(dir); }, "not a zaya checkpoint");
  with("\"version\": 1", "\"version\": 99");
  testing::expect_error([&] { CheckpointReader::open(dir); }, "version: 99 is not supported");
  with("\"shape\": [\n    37\n   ]", "\"shape\": [\n    38\n   ]");
  testing::expect_error([&] { CheckpointReader::open(dir); }, "cover 37 of 38 elements");
  with("\"dtype\": \"F64\"", "\"dtype\": \"I8\"");
  testing::expect_error([&] { CheckpointReader::open(dir); }, "is not supported; allowed: \"F32\", \"F64\"");
  testing::write_file(meta, "{not json");
  testing::expect_error([&] { CheckpointReader::open(dir); }, "invalid JSON");
  fs::remove(meta);
  testing::expect_error([&] { CheckpointReader::open(dir); }, "cannot read");
}

TEST(Checkpoint, WriteErrorsLeaveEarlierCheckpointsIntact) {
  TempDir tmp;
  const std::string good = save_one(tmp.path(), 1, false);
  auto self = make_self_comm();
  CheckpointWriter w(*self, tmp.path(), "run-1", 1, 1, {});
  Saved s;
  set_fault_plan("ckpt-write:rank=0");  // the background write fails (as on a full disk)
  w.save(2, s.tensors(), header({{"step", 2}}), true);
  testing::expect_error([&] { w.finish(); }, "injected checkpoint write fault");
  set_fault_plan("");
  EXPECT_FALSE(fs::exists(fs::path(tmp.path()) / ".step_00000002.partial"));
  EXPECT_FALSE(fs::exists(fs::path(tmp.path()) / "step_00000002"));
  EXPECT_GT(CheckpointReader::open(good).verify(), 0u);
  // The writer is usable again afterwards.
  w.save(3, s.tensors(), header({{"step", 3}}), true);
  w.finish();
  EXPECT_EQ(list_checkpoints(tmp.path()).size(), 2u);
}

}  // namespace
}  // namespace zaya
