#include "zaya/train/train_config.h"

#include <gtest/gtest.h>

#include <string>

#include "zaya/core/error.h"

namespace zaya {
namespace {

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_train_config(text, "bad.toml", overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kMinimal = "[data]\ndir = \"runs/data\"\n";

TEST(TrainConfig, DefaultsPresetAndOverrides) {
  TrainConfig t = parse_train_config(std::string(kMinimal) + "[model]\npreset = \"small\"\nexperts = 4\n", "ok.toml",
                                     {"train.steps=42", "optim.lr=0.01", "train.out_dir=runs/x"});
  EXPECT_EQ(t.model.hidden, 512);
  EXPECT_EQ(t.model.experts, 4);
  EXPECT_EQ(t.run.steps, 42);
  EXPECT_DOUBLE_EQ(t.optim.lr, 0.01);
  EXPECT_EQ(t.run.out_dir, "runs/x");
  EXPECT_EQ(t.schedule.total_steps, 42);
  // Round trip through the TOML writer.
  TrainConfig again = parse_train_config(train_config_to_toml(t), "again.toml");
  EXPECT_EQ(again.model.experts, 4);
  EXPECT_EQ(again.run.steps, 42);
  EXPECT_EQ(train_config_to_toml(again), train_config_to_toml(t));
}

TEST(TrainConfig, ErrorsNameFileKeyValueAndAllowed) {
  std::string e = error_of(std::string(kMinimal) + "[train]\nstesp = 5\n");
  EXPECT_NE(e.find("bad.toml:4"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'train.stesp'"), std::string::npos) << e;
  EXPECT_NE(e.find("steps"), std::string::npos) << e;  // lists the allowed keys
  e = error_of(std::string(kMinimal) + "[train]\nmicro_batch = 0\n");
  EXPECT_NE(e.find("train.micro_batch = 0 is invalid; allowed: an integer in 1.."), std::string::npos) << e;
  e = error_of(std::string(kMinimal) + "[model]\npreset = \"huge\"\n");
  EXPECT_NE(e.find("model.preset = 'huge' is invalid; allowed: one of: tiny, small, zaya1-base"), std::string::npos)
      << e;
  e = error_of(std::string(kMinimal) + "[optim]\nlr = \"fast\"\n");
  EXPECT_NE(e.find("optim.lr"), std::string::npos) << e;
  e = error_of(std::string(kMinimal) + "[model]\nq_heads = 3\n");
  EXPECT_NE(e.find("num_query_groups"), std::string::npos) << e;
  e = error_of("[data\n");
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos) << e;
  e = error_of("[train]\nsteps = 3\n");
  EXPECT_NE(e.find("data.dir is missing"), std::string::npos) << e;
  e = error_of(std::string(kMinimal) + "[trian]\n");
  EXPECT_NE(e.find("unknown section 'trian'"), std::string::npos) << e;
  e = error_of(kMinimal, {"steps=3"});
  EXPECT_NE(e.find("expected section.key=value"), std::string::npos) << e;
  e = error_of(std::string(kMinimal) + "[schedule]\nkind = \"linear\"\n");
  EXPECT_NE(e.find("cosine, wsd, constant"), std::string::npos) << e;
}

}  // namespace
}  // namespace zaya
