// The default model id: the run's name for RUN/final, else the name of what --model points at.
#include "zaya/serve/model_name.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace zaya {
namespace {

TEST(DefaultModelName, RunDirectoryForFinalElseTheName) {
  EXPECT_EQ(default_model_name("runs/tiny/final"), "tiny");
  EXPECT_EQ(default_model_name("runs/tiny/final/"), "tiny");
  EXPECT_EQ(default_model_name("/abs/runs/small/./final"), "small");
  EXPECT_EQ(default_model_name("models/zaya1-base"), "zaya1-base");
  EXPECT_EQ(default_model_name("models/zaya1-base/"), "zaya1-base");
  EXPECT_EQ(default_model_name("out/model-q8.gguf"), "model-q8.gguf");
  EXPECT_EQ(default_model_name("runs/tiny/step_300"), "step_300");
  // A bare "final" is named after the directory it is in.
  EXPECT_EQ(default_model_name("final"), std::filesystem::current_path().filename().string());
}

}  // namespace
}  // namespace zaya
