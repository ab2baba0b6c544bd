// GGUF writer -> reader round trips, metadata values and conversions.

#include "zaya/io/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "zaya/core/bf16.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/q8_0.h"
#include "zaya/core/test_util.h"
#include "zaya/io/gguf_writer.h"

namespace zaya {
namespace {

using testing::TempDir;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Expects f to throw a zaya::Error whose message contains every one of `parts`.
void expect_failure(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  const std::string message = testing::error_of(f);
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint64_t read_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

TEST(GgufValue, AccessorsCheckTypes) {
  EXPECT_EQ(GgufValue::u8(200).as_uint(), 200u);
  EXPECT_EQ(GgufValue::i8(-5).as_int(), -5);
  EXPECT_EQ(GgufValue::i16(-300).as_int(), -300);
  EXPECT_EQ(GgufValue::i32(7).as_uint(), 7u);
  EXPECT_EQ(GgufValue::u64(~uint64_t{0}).as_uint(), ~uint64_t{0});
  EXPECT_EQ(GgufValue::i64(std::numeric_limits<int64_t>::min()).as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(GgufValue::f32(0.25f).as_float(), 0.25);
  EXPECT_EQ(GgufValue::f64(1e-300).as_float(), 1e-300);
  EXPECT_TRUE(GgufValue::boolean(true).as_bool());
  EXPECT_EQ(GgufValue::string("zaya").as_string(), "zaya");
  EXPECT_THROW(GgufValue::i32(-1).as_uint(), Error);
  EXPECT_THROW(GgufValue::u64(~uint64_t{0}).as_int(), Error);
  EXPECT_THROW(GgufValue::f32(1).as_uint(), Error);
  EXPECT_THROW(GgufValue::u32(1).as_float(), Error);
  EXPECT_THROW(GgufValue::u8(1).as_bool(), Error);
  EXPECT_THROW(GgufValue::u8(1).as_string(), Error);

  const std::vector<int16_t> shorts = {-1, 2, -3};
  GgufValue a = GgufValue::numbers<int16_t>(shorts);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a.element_type(), GgufType::kI16);
  EXPECT_EQ(a.element(2).as_int(), -3);
  EXPECT_THROW(a.element(3), Error);
  EXPECT_EQ(a.describe(), "array of 3 int16");
}

TEST(GgufMetadata, TypedLookupsNameTheFileAndKey) {
  GgufMetadata m("m.gguf");
  m.add("a.u8", GgufValue::u8(3));
  m.add("a.neg", GgufValue::i32(-2));
  m.add("a.f", GgufValue::f32(1.5f));
  m.add("a.s", GgufValue::string("x"));
  EXPECT_EQ(m.get_uint("a.u8"), 3u);
  EXPECT_EQ(m.get_int("a.neg"), -2);
  EXPECT_EQ(m.get_float("a.f"), 1.5);
  EXPECT_EQ(m.get_string("a.s"), "x");
  expect_failure([&] { m.get_uint("a.neg"); }, {"m.gguf", "'a.neg'", "int32 -2", "non-negative"});
  expect_failure([&] { m.get_u32("a.u8"); }, {"m.gguf", "'a.u8'", "uint8 3", "expected a uint32"});
  expect_failure([&] { m.get_bool("a.s"); }, {"'a.s'", "string \"x\"", "expected a bool"});
  expect_failure([&] { m.get_string("missing.key"); }, {"m.gguf", "missing metadata key 'missing.key'"});
  expect_failure([&] { m.get_array("a.f", GgufType::kF32); }, {"'a.f'", "an array of float32"});
  expect_failure([&] { m.add("a.u8", GgufValue::u8(1)); }, {"'a.u8' appears twice"});
}

TEST(GgufFormat, FloatToF16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float f = f16_to_float(half);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f)))) << h;
      continue;
    }
    ASSERT_EQ(float_to_f16(f), half) << h;
  }
}

TEST(GgufFormat, FloatToF16RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bffu);
  EXPECT_EQ(float_to_f16(65519.99f), 0x7bffu);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00u);  // halfway to 2^16: ties to even -> inf
  EXPECT_EQ(float_to_f16(-1e9f), 0xfc00u);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000u);  // tie -> even (0)
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002u);         // 1.5 units: tie -> even (2)
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);  // tie -> even (1.0)
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02u);  // tie -> even (odd mantissa rounds up)
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14) * (1 - std::ldexp(1.0f, -12))), 0x0400u);  // rounds up to normal
}

TEST(Gguf, MetadataOfEveryTypeRoundTrips) {
  TempDir dir;
  GgufWriter w;
  const std::vector<uint8_t> u8s = {0, 255};
  const std::vector<int64_t> i64s = {std::numeric_limits<int64_t>::min(), 0, 5};
  const std::vector<double> f64s = {1e-300, -2.5};
  const std::vector<float> f32s = {1.0f, std::numeric_limits<float>::infinity()};
  w.set("t.u8", GgufValue::u8(250));
  w.set("t.i8", GgufValue::i8(-100));
  w.set("t.u16", GgufValue::u16(65535));
  w.set("t.i16", GgufValue::i16(-32768));
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -7);
  w.set_u64("t.u64", ~uint64_t{0});
  w.set_i64("t.i64", std::numeric_limits<int64_t>::min());
  w.set_f32("t.f32", 1e-5f);
  w.set_f64("t.f64", 1e-5);
  w.set_bool("t.bool", true);
  w.set_string("t.string", "h\xc3\xa9llo");
  w.set_string("t.empty", "");
  w.set("t.arr_u8", GgufValue::numbers<uint8_t>(u8s));
  w.set("t.arr_i64", GgufValue::numbers<int64_t>(i64s));
  w.set("t.arr_f32", GgufValue::numbers<float>(f32s));
  w.set("t.arr_f64", GgufValue::numbers<double>(f64s));
  w.set("t.arr_bool", GgufValue::bools({true, false, true}));
  w.set("t.arr_str", GgufValue::strings({"a", "", "ccc"}));
  w.set("t.arr_empty", GgufValue::strings({}));
  w.set("t.nested", GgufValue::arrays({GgufValue::numbers<double>(f64s), GgufValue::strings({"x"}),
                                       GgufValue::arrays({GgufValue::bools({false})})}));
  const std::string path = dir.file("meta.gguf");
  w.write(path);
  EXPECT_EQ(std::filesystem::file_size(path), w.file_size());

  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_TRUE(f.tensors().empty());
  const auto& entries = f.metadata().entries();
  ASSERT_EQ(entries.size(), w.metadata().size() + 1);
  for (size_t i = 0; i < w.metadata().size(); ++i) {
    EXPECT_EQ(entries[i].key, w.metadata().entries()[i].key);
    EXPECT_EQ(entries[i].value, w.metadata().entries()[i].value) << entries[i].key;
  }
  EXPECT_EQ(entries.back().key, "general.alignment");
  EXPECT_EQ(f.metadata().get_u32("general.alignment"), 32u);
  EXPECT_EQ(f.metadata().get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.metadata().get_float("t.f64"), 1e-5);
  EXPECT_EQ(f.metadata().get_string("t.string"), "h\xc3\xa9llo");
  const GgufValue& nested = f.metadata().get_array("t.nested", GgufType::kArray);
  EXPECT_EQ(nested.array_elements()[1].string_elements()[0], "x");
  EXPECT_FALSE(nested.array_elements()[2].array_elements()[0].element(0).as_bool());
}

struct TensorCase {
  std::string name;
  std::vector<int64_t> shape;
  GgmlType type;
};

TEST(Gguf, TensorsRoundTripWithTheSpecLayout) {
  TempDir dir;
  const std::vector<TensorCase> cases = {
      {"a.weight", {3, 5}, GgmlType::kF32}, {"b.weight", {2, 3, 4}, GgmlType::kBF16},
      {"c.bias", {7}, GgmlType::kF16},      {"scalar", {}, GgmlType::kF32},
      {"empty", {0, 4}, GgmlType::kF32},    {"d.weight", {1, 2, 3, 5}, GgmlType::kF64},
      {"e.weight", {33}, GgmlType::kBF16},
  };
  std::vector<std::vector<float>> data;
  GgufWriter w;
  w.set_string("general.architecture", "test");
  for (size_t i = 0; i < cases.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : cases[i].shape) n *= d;
    data.push_back(random_floats(size_t(n), uint32_t(i)));
    if (n > 3) {  // specials survive every float type
      data.back()[0] = std::numeric_limits<float>::infinity();
      data.back()[1] = -0.0f;
      data.back()[2] = std::numeric_limits<float>::quiet_NaN();
    }
    w.add_f32(cases[i].name, cases[i].shape, data.back().data(), cases[i].type);
  }
  const std::string path = dir.file("t.gguf");
  w.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), w.file_size());

  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  ASSERT_EQ(f.tensors().size(), cases.size());
  uint64_t expected_offset = 0;  // ggml's rule: tensors back to back, each padded to the alignment
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.shape, cases[i].shape);
    EXPECT_EQ(t.dims, std::vector<int64_t>(cases[i].shape.rbegin(), cases[i].shape.rend()));
    EXPECT_EQ(t.offset, expected_offset);
    expected_offset += (t.nbytes + 31) / 32 * 32;

    std::vector<float> back(data[i].size(), 1.0f);
    f.read_f32(t.name, back.data(), cases[i].shape);
    for (size_t k = 0; k < back.size(); ++k) {
      float want = data[i][k];
      if (t.type == GgmlType::kBF16) want = bf16_to_float(float_to_bf16(want));
      if (t.type == GgmlType::kF16) want = f16_to_float(float_to_f16(want));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(back[k])) << t.name << "[" << k << "]";
      } else {
        ASSERT_EQ(bits(back[k]), bits(want)) << t.name << "[" << k << "]";
      }
    }
  }
  EXPECT_EQ(f.data_offset() + expected_offset, std::filesystem::file_size(path));
  // The raw bytes of an F32 tensor are the floats themselves.
  auto raw = f.bytes("a.weight");
  ASSERT_EQ(raw.size(), 15 * sizeof(float));
  EXPECT_EQ(std::memcmp(raw.data(), data[0].data(), raw.size()), 0);
}

TEST(Gguf, PiecesRangesAndCustomAlignment) {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3}, b = {4, 5, 6, 7, 8, 9};
  GgufWriter w(64);
  w.add_f32_pieces("stacked", {3, 3}, {a, b});
  const std::vector<uint8_t> bytes = {1, 2, 3, 4};
  w.add_raw("raw_i8", {4}, GgmlType::kI8, bytes.data());
  w.add_f32("x", {2}, a.data(), GgmlType::kBF16);
  const std::string path = dir.file("p.gguf");
  w.write(path);
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % 64, 0u);
  std::vector<float> back(9);
  f.read_f32("stacked", back.data(), {3, 3});
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  f.read_f32("stacked", back.data(), {1, 3, 3});  // leading 1s compare equal
  std::vector<float> part(4);
  f.read_f32_range("stacked", 2, 4, part.data());
  EXPECT_EQ(part, (std::vector<float>{3, 4, 5, 6}));
  auto raw = f.bytes("raw_i8");
  EXPECT_EQ(std::vector<uint8_t>(raw.begin(), raw.end()), bytes);

  expect_failure([&] { f.read_f32("stacked", back.data(), {9}); },
                 {"p.gguf", "'stacked'", "expected shape [9], found [3, 3]"});
  expect_failure([&] { f.read_f32_range("stacked", 6, 4, part.data()); }, {"'stacked'", "has 9 elements"});
  expect_failure([&] { f.read_f32("raw_i8", back.data(), {4}); }, {"'raw_i8'", "ggml type I8"});
  expect_failure([&] { f.tensor("nope"); }, {"p.gguf", "no tensor named 'nope'"});
}

// Q8_0 (ggml type 8): floats quantized as core/q8_0.h into 34-byte blocks of
// 32, read back dequantized or as raw block ranges; shapes whose rows are no
// whole blocks, and ranges off the block boundaries, refused.
TEST(Gguf, Q8_0TensorsRoundTrip) {
  testing::TempDir dir;
  std::vector<float> x(3 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * float(1 + i % 5);
  GgufWriter w;
  w.add_f32("q", {3, 64}, x.data(), GgmlType::kQ8_0);
  w.add_f32("after", {2}, x.data());
  const std::string path = dir.file("q.gguf");
  w.write(path);
  const GgufFile f = GgufFile::open(path);
  const GgufTensorInfo& t = f.tensor("q");
  EXPECT_EQ(t.type, GgmlType::kQ8_0);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(t.nbytes, 6u * 34u);
  std::vector<uint8_t> want(6 * 34);
  quantize_q8_0(x.data(), 192, want.data());
  const auto raw = f.bytes("q");
  EXPECT_TRUE(std::equal(raw.begin(), raw.end(), want.begin(), want.end()));
  std::vector<float> back(192), deq(192);
  f.read_f32("q", back.data(), {3, 64});
  dequantize_q8_0(want.data(), 192, deq.data());
  EXPECT_EQ(back, deq);
  const auto mid = f.range_bytes("q", 64, 96);  // row 1 and the first block of row 2
  EXPECT_EQ(mid.size(), 3u * 34u);
  EXPECT_EQ(mid.data(), raw.data() + 2 * 34);
  expect_failure([&] { f.range_bytes("q", 16, 32); }, {"q.gguf", "tensor 'q'", "blocks of Q8_0"});
  GgufWriter bad;
  expect_failure(
      [&] {
        bad.add_f32("odd", {2, 48}, x.data(), GgmlType::kQ8_0);
      },
      {"'odd'", "cannot be stored as Q8_0", "multiple of 32"});
}

// MXFP4 (ggml type 39, 17-byte blocks, the E8M0 scale byte first): a block whose scale byte is 255 (NaN in the MX
// spec) is a load error naming the file, the tensor and the block, on whole and ranged reads; ranges without it
// and a tensor without it read the exact values e2m1 x 2^(u - 127).
TEST(Gguf, Mxfp4ScaleByte255IsALoadErrorNamingTheTensorAndBlock) {
  testing::TempDir dir;
  std::vector<uint8_t> good(4 * 17), bad;
  for (size_t b = 0; b < 4; ++b) {
    good[b * 17] = uint8_t(126 + b);                                                  // 2^(b - 1)
    for (size_t j = 1; j < 17; ++j) good[b * 17 + j] = uint8_t(0x21 + 16 * (j % 7));  // codes 1 and 2-8
  }
  bad = good;
  bad[3 * 17] = 255;  // block 3: row 1, elements [32, 64) of it
  GgufWriter w;
  w.add_raw("good", {2, 64}, GgmlType::kMXFP4, good.data());
  w.add_raw("blk.0.ffn_up_exps.weight", {2, 64}, GgmlType::kMXFP4, bad.data());
  const std::string path = dir.file("mx.gguf");
  w.write(path);
  const GgufFile f = GgufFile::open(path);
  std::vector<float> back(128);
  f.read_f32("good", back.data(), {2, 64});
  for (size_t b = 0; b < 4; ++b)
    for (size_t j = 0; j < 16; ++j) {
      const uint8_t byte = good[b * 17 + 1 + j];
      const float s = std::ldexp(1.0f, int(b) - 1);
      EXPECT_EQ(back[b * 32 + j], kE2M1Values[byte & 15] * s) << "block " << b << " element " << j;
      EXPECT_EQ(back[b * 32 + j + 16], kE2M1Values[byte >> 4] * s) << "block " << b << " element " << j + 16;
    }
  expect_failure(
      [&] {
        f.read_f32("blk.0.ffn_up_exps.weight", back.data(), {2, 64});
      },
      {"mx.gguf", "tensor 'blk.0.ffn_up_exps.weight'", "MXFP4 block 3", "elements [96, +32)", "scale byte 255", "NaN"});
  expect_failure([&] { f.read_f32_range("blk.0.ffn_up_exps.weight", 64, 64, back.data()); },
                 {"tensor 'blk.0.ffn_up_exps.weight'", "MXFP4 block 3", "elements [96, +32)"});
  f.read_f32_range("blk.0.ffn_up_exps.weight", 0, 96, back.data());  // blocks 0-2: fine
  EXPECT_EQ(back[64], kE2M1Values[good[2 * 17 + 1] & 15] * 2.0f);
}

TEST(GgufWriter, RejectsInvalidInput) {
  const float x[4] = {};
  GgufWriter w;
  expect_failure([&] { GgufWriter bad(12); }, {"alignment 12"});
  expect_failure([&] { GgufWriter bad(4); }, {"alignment 4"});
  expect_failure([&] { w.set_u32("General.name", 1); }, {"'General.name'", "lower_snake_case"});
  expect_failure([&] { w.set_u32("a..b", 1); }, {"'a..b'"});
  expect_failure([&] { w.set_u32("", 1); }, {"key ''"});
  expect_failure([&] { w.set_u32("general.alignment", 64); }, {"general.alignment", "constructor"});
  w.set_u32("a.b", 1);
  expect_failure([&] { w.set_u32("a.b", 2); }, {"'a.b' appears twice"});
  expect_failure([&] { w.add_f32(std::string(64, 'n'), {1}, x); }, {"1 to 63 bytes"});
  expect_failure([&] { w.add_f32("", {1}, x); }, {"1 to 63 bytes"});
  expect_failure([&] { w.add_f32("bad\xff", {1}, x); }, {"UTF-8"});
  expect_failure([&] { w.add_f32("t5", {1, 1, 1, 1, 1}, x); }, {"5 dimensions"});
  expect_failure([&] { w.add_f32("neg", {-1}, x); }, {"'neg'", "shape [-1]"});
  expect_failure([&] { w.add_f32("big", {int64_t{1} << 62, 4}, x); }, {"'big'", "2^63-1"});
  expect_failure([&] { w.add_f32_pieces("p", {5}, {std::span<const float>(x, 4)}); },
                 {"'p'", "pieces hold 4 floats, the shape 5"});
  expect_failure([&] { w.add_f32("i", {4}, x, GgmlType::kI32); }, {"'i'", "I32"});
  w.add_f32("t", {4}, x);
  expect_failure([&] { w.add_f32("t", {4}, x); }, {"'t' added twice"});
}

TEST(GgufWriter, HeaderBytesFollowTheSpec) {
  TempDir dir;
  GgufWriter w;
  w.set_string("general.architecture", "zaya");
  const float x[6] = {};
  w.add_f32("w", {2, 3}, x);
  const std::string path = dir.file("h.gguf");
  w.write(path);
  const std::string s = testing::read_file(path);
  EXPECT_EQ(s.substr(0, 4), "GGUF");
  EXPECT_EQ(static_cast<uint8_t>(s[4]), 3);  // version, little-endian u32
  EXPECT_EQ(read_u64(s, 8), 1u);             // tensor count
  EXPECT_EQ(read_u64(s, 16), 2u);            // general.architecture + general.alignment
  EXPECT_EQ(read_u64(s, 24), std::string("general.architecture").size());
  EXPECT_EQ(s.substr(32, 20), "general.architecture");
}

}  // namespace
}  // namespace zaya
