// The quantized-expert reader (formats/quantized_experts.h): quantization_config
// parsing, every accepted tensor naming into the packed rows, and every damaged
// input a load error naming the tensor and what was expected.
#include "zaya/formats/quantized_experts.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/test_util.h"
#include "zaya/io/safetensors_dir.h"

namespace zaya {
namespace quantized_experts_test {

using testing::expect_error;

nlohmann::json ct_config(const std::string& format, nlohmann::json weights) {
  return {{"quantization_config",
           {{"quant_method", "compressed-tensors"},
            {"format", format},
            {"quantization_status", "compressed"},
            {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}, {"format", format}}}}}}}};
}
const nlohmann::json kMxWeights = {
    {"num_bits", 4}, {"type", "float"}, {"strategy", "group"}, {"group_size", 32}, {"symmetric", true}};
const nlohmann::json kFp8Weights = {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}};

TEST(QuantizedExperts, ParsesTheSupportedConfigsAndNamesTheRest) {
  EXPECT_FALSE(parse_expert_quant(nlohmann::json{{"hidden_size", 8}}, "c.json").quantized());
  EXPECT_EQ(parse_expert_quant(ct_config("mxfp4-pack-quantized", kMxWeights), "c.json").format,
            ExpertQuantFormat::kMxfp4);
  EXPECT_EQ(parse_expert_quant(ct_config("float-quantized", kFp8Weights), "c.json").format,
            ExpertQuantFormat::kFp8Channel);
  const ExpertQuant block = parse_expert_quant(
      nlohmann::json{{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {64, 128}}}}}, "c.json");
  EXPECT_EQ(block.format, ExpertQuantFormat::kFp8Block);
  EXPECT_EQ(block.block_rows, 64);
  expect_error([] { parse_expert_quant(ct_config("nvfp4-pack-quantized", kMxWeights), "c.json"); },
               "format 'nvfp4-pack-quantized'; supported: mxfp4-pack-quantized, float-quantized");
  nlohmann::json tensor = kFp8Weights;
  tensor["strategy"] = "tensor";
  expect_error([&] { parse_expert_quant(ct_config("float-quantized", tensor), "c.json"); }, "strategy \"channel\"");
  nlohmann::json g16 = kMxWeights;
  g16["group_size"] = 16;
  expect_error([&] { parse_expert_quant(ct_config("mxfp4-pack-quantized", g16), "c.json"); }, "group_size 32");
  expect_error(
      [] {
        parse_expert_quant(nlohmann::json{{"quantization_config", {{"quant_method", "awq"}}}}, "c.json");
      },
      "c.json: quantization_config: quant_method 'awq'; supported:");
  expect_error(
      [] {
        parse_expert_quant(
            nlohmann::json{{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128, 64}}}}},
            "c.json");
      },
      "weight_block_size is [128,64]; supported: [rows, 128]");
}

constexpr int64_t kE = 2, kRows = 4, kCols = 64;
const std::string kBase = "model.layers.0.mlp.experts.gate_up_proj";

// Stacked MXFP4 tensors: byte (e, r, i) = e * 64 + r * 16 + i, scales 120 + e + r + b.
struct MxFiles {
  std::vector<uint8_t> packed = std::vector<uint8_t>(size_t(kE * kRows * kCols / 2));
  std::vector<uint8_t> scales = std::vector<uint8_t>(size_t(kE * kRows * kCols / 32));
  MxFiles() {
    for (size_t i = 0; i < packed.size(); ++i) packed[i] = uint8_t(i * 7);
    for (int64_t e = 0; e < kE; ++e)
      for (int64_t r = 0; r < kRows; ++r)
        for (int64_t b = 0; b < 2; ++b) scales[size_t((e * kRows + r) * 2 + b)] = uint8_t(120 + e + r + b);
  }
};

std::vector<uint8_t> read_expert(const std::string& dir, const ExpertQuant& q, int64_t expert, int64_t rows = kRows) {
  const SafetensorsDir st = SafetensorsDir::open(dir);
  std::vector<uint8_t> out(size_t(rows * weight_row_bytes(q.weight_type(), kCols)));
  std::set<std::string> used;
  read_quantized_expert(st, q, kBase, kE, expert, rows, kCols, out.data(), used);
  return out;
}

TEST(QuantizedExperts, StackedMxfp4IntoPackedRows) {
  testing::TempDir dir;
  MxFiles f;
  SafetensorsWriter w;
  w.add_raw(kBase + ".weight_packed", SafetensorsDtype::kU8, {kE, kRows, kCols / 2}, f.packed.data());
  w.add_raw(kBase + ".weight_scale", SafetensorsDtype::kU8, {kE, kRows, kCols / 32}, f.scales.data());
  w.write(dir.file("model.safetensors"));
  const ExpertQuant q{ExpertQuantFormat::kMxfp4, 0};
  const std::vector<uint8_t> got = read_expert(dir.path(), q, 1);
  const int64_t rb = mxfp4_row_bytes(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(0, std::memcmp(got.data() + r * rb, f.packed.data() + (kRows + r) * 32, 32)) << r;
    EXPECT_EQ(got[size_t(r * rb + 32)], 121 + r);
    EXPECT_EQ(got[size_t(r * rb + 33)], 122 + r);
  }
}

TEST(QuantizedExperts, PerExpertAndSplitGateUpNames) {
  MxFiles f;
  const ExpertQuant q{ExpertQuantFormat::kMxfp4, 0};
  testing::TempDir stacked, per_expert, split;
  {
    SafetensorsWriter w;
    w.add_raw(kBase + "_packed", SafetensorsDtype::kU8, {kE, kRows, kCols / 2}, f.packed.data());
    w.add_raw(kBase + "_scale", SafetensorsDtype::kU8, {kE, kRows, kCols / 32}, f.scales.data());
    w.write(stacked.file("model.safetensors"));
  }
  {
    SafetensorsWriter w;
    for (int64_t e = 0; e < kE; ++e) {
      const std::string p = "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_up_proj";
      w.add_raw(p + ".weight_packed", SafetensorsDtype::kU8, {kRows, kCols / 2}, f.packed.data() + e * kRows * 32);
      w.add_raw(p + ".weight_scale", SafetensorsDtype::kU8, {kRows, 2}, f.scales.data() + e * kRows * 2);
    }
    w.write(per_expert.file("model.safetensors"));
  }
  {
    SafetensorsWriter w;  // gate = rows 0-1, up = rows 2-3
    for (int64_t e = 0; e < kE; ++e)
      for (int half = 0; half < 2; ++half) {
        const std::string p =
            "model.layers.0.mlp.experts." + std::to_string(e) + (half == 0 ? ".gate_proj" : ".up_proj");
        const int64_t r0 = e * kRows + 2 * half;
        w.add_raw(p + ".weight_packed", SafetensorsDtype::kU8, {2, kCols / 2}, f.packed.data() + r0 * 32);
        w.add_raw(p + ".weight_scale", SafetensorsDtype::kU8, {2, 2}, f.scales.data() + r0 * 2);
      }
    w.write(split.file("model.safetensors"));
  }
  for (int64_t e = 0; e < kE; ++e) {
    const std::vector<uint8_t> want = read_expert(stacked.path(), q, e);
    EXPECT_EQ(read_expert(per_expert.path(), q, e), want) << e;
    EXPECT_EQ(read_expert(split.path(), q, e), want) << e;
  }
}

TEST(QuantizedExperts, DamagedMxfp4IsAnErrorNamingTheTensor) {
  MxFiles f;
  const ExpertQuant q{ExpertQuantFormat::kMxfp4, 0};
  {
    testing::TempDir dir;
    SafetensorsWriter w;
    std::vector<uint8_t> nan = f.scales;
    nan[size_t((1 * kRows + 2) * 2 + 1)] = 255;
    w.add_raw(kBase + ".weight_packed", SafetensorsDtype::kU8, {kE, kRows, kCols / 2}, f.packed.data());
    w.add_raw(kBase + ".weight_scale", SafetensorsDtype::kU8, {kE, kRows, kCols / 32}, nan.data());
    w.write(dir.file("model.safetensors"));
    read_expert(dir.path(), q, 0);  // expert 0 is intact
    expect_error([&] { read_expert(dir.path(), q, 1); },
                 "tensor '" + kBase + ".weight_scale': scale byte 255 (NaN in the MX spec) at [1, 2, 1]");
  }
  {
    testing::TempDir dir;
    SafetensorsWriter w;
    w.add_raw(kBase + ".weight_packed", SafetensorsDtype::kU8, {kE, kRows, kCols / 2}, f.packed.data());
    w.write(dir.file("model.safetensors"));
    expect_error([&] { read_expert(dir.path(), q, 0); }, "quantized tensor '" + kBase +
                                                             ".weight_packed' has no scale tensor; expected one of '" +
                                                             kBase + ".weight_scale', '" + kBase + "_scale'");
  }
  {
    testing::TempDir dir;
    SafetensorsWriter w;
    w.add_raw(kBase + ".weight_packed", SafetensorsDtype::kU8, {kE, kRows, kCols / 2}, f.packed.data());
    w.add_raw(kBase + ".weight_scale", SafetensorsDtype::kU8, {kE, kRows, 1}, f.scales.data());
    w.write(dir.file("model.safetensors"));
    expect_error([&] { read_expert(dir.path(), q, 0); },
                 "tensor '" + kBase + ".weight_scale': expected shape [2, 4, 2], found [2, 4, 1]");
  }
  {
    testing::TempDir dir;
    SafetensorsWriter w;
    w.add_raw(kBase + ".weight_packed", SafetensorsDtype::kI8, {kE, kRows, kCols / 2}, f.packed.data());
    w.add_raw(kBase + ".weight_scale", SafetensorsDtype::kU8, {kE, kRows, 2}, f.scales.data());
    w.write(dir.file("model.safetensors"));
    expect_error([&] { read_expert(dir.path(), q, 0); }, "expected dtype U8, found I8");
  }
  {
    testing::TempDir dir;
    SafetensorsWriter w;
    const float x = 1;
    w.add_f32("other", {1}, &x);
    w.write(dir.file("model.safetensors"));
    expect_error([&] { read_expert(dir.path(), q, 0); },
                 "expert 0 of '" + kBase + "' (mxfp4 (compressed-tensors mxfp4-pack-quantized)): no quantized weight");
  }
}

TEST(QuantizedExperts, Fp8ChannelAndBlockScales) {
  std::vector<uint8_t> codes(size_t(kE * kRows * kCols));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(0x30 + i % 16);
  testing::TempDir channel, block, nan;
  {
    std::vector<float> s(size_t(kE * kRows));
    for (size_t i = 0; i < s.size(); ++i) s[i] = 0.5f + float(i);
    SafetensorsWriter w;
    w.add_raw(kBase + ".weight", SafetensorsDtype::kF8E4M3, {kE, kRows, kCols}, codes.data());
    w.add_f32(kBase + ".weight_scale", {kE, kRows, 1}, s.data());
    w.write(channel.file("model.safetensors"));
    const std::vector<uint8_t> got = read_expert(channel.path(), {ExpertQuantFormat::kFp8Channel, 0}, 1);
    std::vector<float> row(kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      dequantize_fp8_row(got.data() + r * fp8_row_bytes(kCols), kCols, row.data());
      for (int64_t i = 0; i < kCols; ++i)
        EXPECT_EQ(row[size_t(i)], e4m3_to_float(codes[size_t((kRows + r) * kCols + i)]) * (0.5f + float(kRows + r)));
    }
  }
  {
    const float s[kE] = {2.0f, 3.0f};  // blocks of 4 rows x 128 columns: one per expert
    SafetensorsWriter w;
    w.add_raw(kBase, SafetensorsDtype::kF8E4M3, {kE, kRows, kCols}, codes.data());
    w.add_f32(kBase + "_scale_inv", {kE, 1, 1}, s);
    w.write(block.file("model.safetensors"));
    const std::vector<uint8_t> got = read_expert(block.path(), {ExpertQuantFormat::kFp8Block, 4}, 1);
    float first;
    std::memcpy(&first, got.data() + kCols, 4);
    EXPECT_EQ(first, 3.0f);
    expect_error([&] { read_expert(block.path(), {ExpertQuantFormat::kFp8Block, 2}, 1); }, "expected shape [2, 2, 1]");
  }
  {
    std::vector<uint8_t> bad = codes;
    bad[size_t(kRows * kCols + 5)] = 0xff;
    std::vector<float> s(size_t(kE * kRows), 1.0f);
    SafetensorsWriter w;
    w.add_raw(kBase + ".weight", SafetensorsDtype::kF8E4M3, {kE, kRows, kCols}, bad.data());
    w.add_f32(kBase + ".weight_scale", {kE, kRows, 1}, s.data());
    w.write(nan.file("model.safetensors"));
    expect_error(
        [&] {
          read_expert(nan.path(), {ExpertQuantFormat::kFp8Channel, 0}, 1);
        },
        "tensor '" + kBase + ".weight': FP8 NaN code 0xff at row 0 column 5");
  }
}

}  // namespace quantized_experts_test
}  // namespace zaya
