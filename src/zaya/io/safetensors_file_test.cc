#include "zaya/io/safetensors_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/io/safetensors_writer.h"

namespace zaya {
namespace {

using testing::error_of;
using testing::expect_error;
using testing::read_file;

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i) - 3.0f;
  return v;
}

TEST(SafetensorsFile, RoundTripF32I32AndMetadata) {
  testing::TempDir dir;
  std::vector<float> w = ramp(6, 0.25f);
  std::vector<int32_t> ids = {7, -1, 2147483647, std::numeric_limits<int32_t>::min()};
  float scalar = 42.5f;
  SafetensorsWriter out;
  out.set_metadata("format", "pt");
  out.set_metadata("step", "100");
  out.add_i32("ids", {4}, ids.data());
  out.add_f32("model.w", {2, 3}, w.data());
  out.add_f32("scalar", {}, &scalar);
  out.add_f32("empty", {0, 5}, nullptr);
  const std::string path = dir.file("model.safetensors");
  out.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  SafetensorsFile st = SafetensorsFile::open(path);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"ids", "model.w", "scalar", "empty"}));
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.metadata().at("step"), "100");
  EXPECT_TRUE(st.has("model.w"));
  EXPECT_FALSE(st.has("model.x"));
  EXPECT_EQ(st.info("model.w").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(st.info("model.w").dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(st.info("empty").numel, 0);

  std::vector<float> w2(6);
  st.read_f32("model.w", w2.data(), {2, 3});
  EXPECT_EQ(w2, w);
  float s2 = 0;
  st.read_f32("scalar", &s2, {});
  EXPECT_EQ(s2, scalar);
  std::vector<int32_t> ids2(4);
  st.read_i32("ids", ids2.data(), {4});
  EXPECT_EQ(ids2, ids);
  st.read_f32("empty", nullptr, {0, 5});
}

// The header is padded so the data buffer starts 8-aligned, and tensors are
// packed widest dtype first without gaps, so each is naturally aligned.
TEST(SafetensorsFile, WriterLayoutIsAlignedAndPacked) {
  testing::TempDir dir;
  std::vector<float> a = ramp(3, 1.0f);
  std::vector<int64_t> b = {1, 2};
  std::vector<uint8_t> c = {1, 2, 3};
  SafetensorsWriter out;
  out.add_raw("c_u8", SafetensorsDtype::kU8, {3}, c.data());
  out.add_bf16("a_bf16", {3}, a.data());
  out.add_raw("b_i64", SafetensorsDtype::kI64, {2}, b.data());
  out.add_f32("d_f32", {3}, a.data());
  const std::string path = dir.file("x.safetensors");
  out.write(path);

  std::string bytes = read_file(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ((8 + header_len) % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ(bytes[8 + header_len - 1] == ' ' || bytes[8 + header_len - 1] == '}', true);

  SafetensorsFile st = SafetensorsFile::open(path);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"c_u8", "a_bf16", "b_i64", "d_f32"}));
  EXPECT_EQ(st.info("b_i64").begin, 0u);
  EXPECT_EQ(st.info("d_f32").begin, 16u);
  EXPECT_EQ(st.info("a_bf16").begin, 28u);
  EXPECT_EQ(st.info("c_u8").begin, 34u);
  EXPECT_EQ(st.data_buffer().size(), 37u);
  for (const auto& t : st.tensors()) EXPECT_EQ(t.begin % dtype_size(t.dtype), 0u) << t.name;
  auto raw = st.bytes("c_u8");
  EXPECT_EQ(std::vector<uint8_t>(raw.begin(), raw.end()), c);
}

TEST(SafetensorsFile, Bf16RoundsToNearestEven) {
  testing::TempDir dir;
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: goes to the even one (1).
  // 1 + 3*2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6: goes to 1 + 2^-6.
  // 1 + 2^-8 + 2^-20 is above the tie: rounds up.
  std::vector<float> v = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 1.0f + 1.0f / 256 + 1.0f / (1 << 20), -2.5f,
                          std::numeric_limits<float>::infinity()};
  std::vector<float> expect = {1.0f, 1.0f + 4.0f / 256, 1.0f + 2.0f / 256, -2.5f,
                               std::numeric_limits<float>::infinity()};
  SafetensorsWriter out;
  out.add_bf16("v", {5}, v.data());
  out.write(dir.file("bf16.safetensors"));
  SafetensorsFile st = SafetensorsFile::open(dir.file("bf16.safetensors"));
  EXPECT_EQ(st.info("v").dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(st.info("v").nbytes(), 10u);
  std::vector<float> got(5);
  st.read_f32("v", got.data(), {5});
  EXPECT_EQ(got, expect);
}

// Large enough to take the parallel conversion path and several BF16 write chunks.
TEST(SafetensorsFile, LargeBf16RoundTrip) {
  testing::TempDir dir;
  const int64_t n = 200003;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.001f * static_cast<float>(i)) * 100.0f;
  SafetensorsWriter out;
  out.add_bf16("v", {n}, v.data());
  out.write(dir.file("big.safetensors"));
  std::vector<float> got(n);
  SafetensorsFile::open(dir.file("big.safetensors")).read_f32("v", got.data(), {n});
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], bf16_to_float(float_to_bf16(v[i]))) << i;
}

TEST(SafetensorsFile, ReadsF16AndF64AsFloat) {
  testing::TempDir dir;
  std::vector<uint16_t> half = {0x3c00, 0xc000, 0x7bff, 0x0001};  // 1, -2, 65504, 2^-24
  std::vector<double> wide = {0.1, -1e30, 3.0};
  SafetensorsWriter out;
  out.add_raw("h", SafetensorsDtype::kF16, {2, 2}, half.data());
  out.add_raw("d", SafetensorsDtype::kF64, {3}, wide.data());
  out.write(dir.file("mixed.safetensors"));
  SafetensorsFile st = SafetensorsFile::open(dir.file("mixed.safetensors"));
  std::vector<float> h(4), d(3);
  st.read_f32("h", h.data(), {2, 2});
  st.read_f32("d", d.data(), {3});
  EXPECT_EQ(h, (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
  EXPECT_EQ(d, (std::vector<float>{0.1f, -1e30f, 3.0f}));
}

TEST(SafetensorsFile, ReadI32NarrowsInRangeIntegers) {
  testing::TempDir dir;
  std::vector<int64_t> ok = {0, -5, 2147483647};
  std::vector<int64_t> big = {1, 2, 4294967296};
  std::vector<uint8_t> bytes = {0, 255};
  SafetensorsWriter out;
  out.add_raw("ok", SafetensorsDtype::kI64, {3}, ok.data());
  out.add_raw("big", SafetensorsDtype::kI64, {3}, big.data());
  out.add_raw("bytes", SafetensorsDtype::kU8, {2}, bytes.data());
  out.write(dir.file("ints.safetensors"));
  SafetensorsFile st = SafetensorsFile::open(dir.file("ints.safetensors"));
  std::vector<int32_t> got(3);
  st.read_i32("ok", got.data(), {3});
  EXPECT_EQ(got, (std::vector<int32_t>{0, -5, 2147483647}));
  st.read_i32("bytes", got.data(), {2});
  EXPECT_EQ(got[1], 255);
  expect_error([&] { st.read_i32("big", got.data(), {3}); },
               "tensor 'big': element 2 is 4294967296, which does not fit in int32");
}

TEST(SafetensorsFile, ReadErrorsNameExpectedAndFound) {
  testing::TempDir dir;
  std::vector<float> w = ramp(6, 1.0f);
  std::vector<int32_t> ids = {1, 2};
  SafetensorsWriter out;
  out.add_f32("w", {2, 3}, w.data());
  out.add_i32("ids", {2}, ids.data());
  const std::string path = dir.file("m.safetensors");
  out.write(path);
  SafetensorsFile st = SafetensorsFile::open(path);
  std::vector<float> buf(6);
  std::vector<int32_t> ibuf(6);
  const std::string shape_error = path + ": tensor 'w': expected shape [3, 2], found [2, 3]";
  EXPECT_EQ(error_of([&] { st.read_f32("w", buf.data(), {3, 2}); }), shape_error);
  EXPECT_EQ(error_of([&] { st.read_f32("ids", buf.data(), {2}); }),
            path + ": tensor 'ids' has dtype I32; read_f32 accepts F32, BF16, F16 or F64");
  expect_error([&] { st.read_i32("w", ibuf.data(), {2, 3}); }, "has dtype F32; read_i32 accepts");
  EXPECT_EQ(error_of([&] { st.info("nope"); }), path + ": no tensor named 'nope'");
}

TEST(SafetensorsFile, OpenErrors) {
  testing::TempDir dir;
  expect_error([&] { SafetensorsFile::open(dir.file("missing.safetensors")); }, "cannot open");
  expect_error([&] { SafetensorsFile::open(dir.path()); }, "not a regular file");
  expect_error([&] { SafetensorsFile::open(dir.write("empty", "")); }, "0 bytes, too short");
}

TEST(SafetensorsWriter, RejectsBadTensors) {
  float x = 0;
  SafetensorsWriter out;
  out.add_f32("a", {1}, &x);
  expect_error([&] { out.add_f32("a", {1}, &x); }, "tensor 'a' added twice");
  expect_error([&] { out.add_f32("", {1}, &x); }, "name is empty");
  expect_error([&] { out.add_f32("__metadata__", {1}, &x); }, "reserved");
  expect_error([&] { out.add_f32("b", {2, -1}, &x); }, "shape [2, -1] has a negative dimension");
  expect_error([&] { out.add_f32("c", {1 << 30, 1 << 30, 1 << 30}, &x); }, "too many elements");
  expect_error([&] { out.add_f32("d", {2}, nullptr); }, "source pointer is null");
  EXPECT_EQ(out.tensors().size(), 1u);
}

TEST(SafetensorsWriter, FailedWriteLeavesOldFileAndNoTemporary) {
  testing::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  float x = 1.0f;
  SafetensorsWriter good;
  good.add_f32("x", {1}, &x);
  good.write(path);
  const std::string before = read_file(path);

  SafetensorsWriter bad;
  bad.add_f32("bad\xff name", {1}, &x);  // not UTF-8: cannot go into a JSON header
  expect_error([&] { bad.write(path); }, "valid UTF-8");
  EXPECT_EQ(read_file(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  expect_error([&] { good.write(dir.file("no/such/dir/m.safetensors")); }, "cannot create");
}

TEST(SafetensorsWriter, EmptyWriterProducesValidFile) {
  testing::TempDir dir;
  SafetensorsWriter().write(dir.file("e.safetensors"));
  EXPECT_EQ(read_file(dir.file("e.safetensors")), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_TRUE(SafetensorsFile::open(dir.file("e.safetensors")).tensors().empty());
}

}  // namespace
}  // namespace zaya
