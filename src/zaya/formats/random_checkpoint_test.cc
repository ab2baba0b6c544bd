// `zaya ckpt random` (formats/random_checkpoint.h): the streamed directory, in
// either layout and dtype and split into shards, loads to exactly what the
// normal path (ZayaModel::init, then a save in that layout and dtype) loads to.
#include "zaya/formats/random_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

struct Loaded {
  std::vector<float> params, buffers;
};

Loaded load(const ZayaConfig& c, const std::string& dir) {
  const ParamTable p(c, true), b(c, false);
  Loaded out{std::vector<float>(size_t(p.total_floats())), std::vector<float>(size_t(b.total_floats()))};
  load_model_directory_tensors(dir, c, p, out.params.data(), b, out.buffers.data());
  return out;
}

TEST(RandomCheckpoint, StreamedDirectoryLoadsAsTheInitialisedModelSaved) {
  const ZayaConfig c = testing::model_test_config();
  for (DirectoryLayout layout : {DirectoryLayout::kLegacy, DirectoryLayout::kNative})
    for (const char* dtype : {"bf16", "f32"}) {
      SCOPED_TRACE(std::string(directory_layout_name(layout)) + " " + dtype);
      testing::TempDir streamed, saved;
      RandomCheckpointOptions o;
      o.seed = 17;
      o.layout = layout;
      o.dtype = dtype;
      o.max_shard_bytes = 4096;  // several shards and an index
      const std::string out = streamed.file("out");
      const RandomCheckpointSummary s = write_random_model_directory(c, out, o);
      EXPECT_GT(s.files, 1);
      EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(out) / kSafetensorsIndexFile));
      ZayaModel model(c);
      model.init(17);
      HfSaveOptions ho;
      ho.dtype = dtype;
      save_model_directory(c, complete_model_tensors(model), saved.path(), layout, ho);
      const Loaded a = load(c, out), b = load(c, saved.path());
      EXPECT_EQ(0, std::memcmp(a.params.data(), b.params.data(), sizeof(float) * a.params.size()));
      EXPECT_EQ(a.buffers, b.buffers);
      EXPECT_EQ(SafetensorsDir::open(out).names().size(), SafetensorsDir::open(saved.path()).names().size());
      // Another seed is another model.
      o.seed = 18;
      write_random_model_directory(c, streamed.file("other"), o);
      EXPECT_NE(load(c, streamed.file("other")).params, a.params);
    }
}

TEST(RandomCheckpoint, RefusesANonEmptyOutAndABadDtype) {
  const ZayaConfig c = testing::model_test_config();
  testing::TempDir dir;
  dir.write("x", "x");
  try {
    write_random_model_directory(c, dir.path(), {});
    FAIL() << "wrote into a non-empty directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exists and is not empty"), std::string::npos) << e.what();
  }
  RandomCheckpointOptions o;
  o.dtype = "f16";
  try {
    write_random_model_directory(c, dir.file("new"), o);
    FAIL() << "accepted --dtype f16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: bf16, f32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zaya
