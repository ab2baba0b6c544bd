// The training options parsed into enums at the config boundary (train_config.h): each name reads as its value,
// is written back by name, and any other word is refused naming the file, the key, the value and the names.

#include <gtest/gtest.h>

#include <string>

#include "zaya/core/error.h"
#include "zaya/train/train_config.h"

namespace zaya {
namespace {

const std::string kEnumData = "[data]\ndir = \"runs/data\"\n";

std::string enum_error_of(const std::string& set) {
  try {
    parse_train_config(kEnumData, "enums.toml", {set});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfigEnums, EveryNameRoundTripsThroughTheRunConfig) {
  for (const auto& p : kGemmPrecisionNames) {
    const TrainConfig t = parse_train_config(kEnumData, "e.toml", {std::string("train.precision=") + p.name});
    EXPECT_EQ(t.run.precision, p.value) << p.name;
    EXPECT_EQ(parse_train_config(train_config_to_toml(t), "again.toml").run.precision, p.value) << p.name;
  }
  for (const auto& s : kOnSaveErrorNames) {
    const TrainConfig t = parse_train_config(kEnumData, "e.toml", {std::string("ft.on_save_error=") + s.name});
    EXPECT_EQ(t.ft.on_save_error, s.value) << s.name;
    EXPECT_EQ(parse_train_config(train_config_to_toml(t), "again.toml").ft.on_save_error, s.value) << s.name;
  }
  for (const auto& l : kDirectoryLayoutNames) {
    const TrainConfig t = parse_train_config(kEnumData, "e.toml", {std::string("train.save_layout=") + l.name});
    EXPECT_EQ(t.run.save_layout, l.value) << l.name;
    EXPECT_NE(train_config_to_toml(t).find(std::string("save_layout = \"") + l.name + "\""), std::string::npos);
  }
  EXPECT_EQ(parse_train_config(kEnumData, "e.toml").run.precision, GemmPrecision::kF32);  // the defaults
  EXPECT_EQ(parse_train_config(kEnumData, "e.toml").ft.on_save_error, OnSaveError::kContinue);
  EXPECT_EQ(parse_train_config(kEnumData, "e.toml").run.save_layout, DirectoryLayout::kLegacy);
}

TEST(TrainConfigEnums, OtherWordsAreRefusedWithTheNames) {
  EXPECT_NE(enum_error_of("ft.on_save_error=retry")
                .find("--set ft.on_save_error=retry: ft.on_save_error = 'retry' is invalid; allowed: one of: "
                      "continue, stop"),
            std::string::npos)
      << enum_error_of("ft.on_save_error=retry");
  EXPECT_NE(enum_error_of("train.save_layout=gguf")
                .find("train.save_layout = 'gguf' is invalid; allowed: one of: legacy, "
                      "native"),
            std::string::npos);
}

}  // namespace
}  // namespace zaya
