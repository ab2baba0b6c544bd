// Finding the tokenizer when only some inputs need one.
#include "zaya/infer/text.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "zaya/data/test_util.h"

namespace zaya {
namespace {

TEST(Text, TokenizerIsLoadedWhenGivenOrNextToTheWeights) {
  testing::TempDir model;
  // None given and none beside the weights: none, and no error.
  EXPECT_FALSE(load_tokenizer_if_present(model.path(), "").has_value());
  // The hint (a training checkpoint's tokenizer) when the directory has none.
  const auto hinted = load_tokenizer_if_present(model.path(), "", testing::small_tokenizer_path());
  ASSERT_TRUE(hinted.has_value());
  EXPECT_EQ(hinted->model_path(), testing::small_tokenizer_path());
  // The one beside the weights.
  std::filesystem::copy_file(testing::small_tokenizer_path(), model.file("tokenizer.model"));
  const auto beside = load_tokenizer_if_present(model.path(), "", "elsewhere.model");
  ASSERT_TRUE(beside.has_value());
  EXPECT_EQ(beside->model_path(), model.file("tokenizer.model"));
  EXPECT_EQ(beside->vocab_size(), 400);
  // A given tokenizer must exist.
  EXPECT_NE(testing::error_of([&] {
              load_tokenizer_if_present(model.path(), model.file("missing.model"));
            }).find("missing.model"),
            std::string::npos);
}

}  // namespace
}  // namespace zaya
