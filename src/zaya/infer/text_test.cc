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

// A command that needs a tokenizer: the one found, or an error saying how to give one.
TEST(Text, AMissingTokenizerSaysHowToGiveOne) {
  testing::TempDir model;
  testing::expect_error([&] { load_model_tokenizer(model.path(), ""); },
                        "has no tokenizer.model; pass --tokenizer FILE (a SentencePiece .model) or copy it to " +
                            model.file("tokenizer.model"));
  testing::expect_error([&] { load_model_tokenizer(model.path(), "", model.file("gone.model")); },
                        "'" + model.file("gone.model") + "' (the one it records) does not exist; pass --tokenizer");
  testing::expect_error([&] { load_model_tokenizer(model.path(), model.file("given.model")); },
                        "given.model: tokenizer model not found");
  EXPECT_EQ(load_model_tokenizer(model.path(), "", testing::small_tokenizer_path()).model_path(),
            testing::small_tokenizer_path());
  std::filesystem::copy_file(testing::small_tokenizer_path(), model.file("tokenizer.model"));
  EXPECT_EQ(load_model_tokenizer(model.path(), "").model_path(), model.file("tokenizer.model"));
}

}  // namespace
}  // namespace zaya
