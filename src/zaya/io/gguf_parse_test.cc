// The GGUF parser against malformed and hostile files: every defect is a
// zaya::Error naming the file, the key or tensor and the field; nothing
// crashes or reads out of bounds (this file also runs under ASan/UBSan).

#include "zaya/io/gguf_parse.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/io/gguf_writer.h"

namespace zaya {
namespace {

// Builds GGUF bytes field by field, so tests can write anything, valid or not.
struct Bytes {
  std::string s;
  Bytes& u8(uint8_t v) {
    s.push_back(static_cast<char>(v));
    return *this;
  }
  Bytes& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  Bytes& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  Bytes& str(std::string_view v) {
    u64(v.size());
    s.append(v);
    return *this;
  }
  Bytes& raw(std::string_view v) {
    s.append(v);
    return *this;
  }
  Bytes& pad(size_t alignment = 32) {
    s.resize((s.size() + alignment - 1) / alignment * alignment, '\0');
    return *this;
  }
  // A tensor info: name, dims in ggml order, ggml type, offset.
  Bytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
};

Bytes header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  Bytes b;
  b.raw("GGUF").u32(version).u64(tensors).u64(kvs);
  return b;
}

// One metadata pair (general.name = "m") and one F32 tensor [4] of 16 bytes.
std::string one_tensor(std::vector<uint64_t> dims = {4}, uint32_t type = 0, uint64_t offset = 0,
                       size_t data_bytes = 16) {
  Bytes b = header(1, 1);
  b.str("general.name").u32(8).str("m").tensor("w", std::move(dims), type, offset).pad();
  b.s.append(data_bytes, '\x01');
  return b.s;
}

std::span<const uint8_t> as_span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

GgufLayout parse(const std::string& file) { return parse_gguf_layout("bad.gguf", as_span(file)); }

struct BadCase {
  const char* what;
  std::string file;
  std::vector<std::string> parts;  // each must appear in the message
};

// A file whose only metadata pair has key "k.v", value type `type` and value bytes `value`.
std::string one_kv(uint32_t type, const std::string& value) { return header(0, 1).str("k.v").u32(type).raw(value).s; }

std::vector<BadCase> bad_cases() {
  const uint64_t huge = uint64_t{1} << 62;
  std::string nested = header(0, 1).str("k.v").u32(9).s;  // 10 nested arrays of arrays, then an empty u8 array
  for (int i = 0; i < 10; ++i) nested += Bytes().u32(9).u64(1).s;
  nested += Bytes().u32(0).u64(0).s;
  std::string many_empty_arrays;  // (kGgufMaxNestedArrayElements + 1) empty uint8 arrays
  const std::string empty_array = Bytes().u32(0).u64(0).s;
  for (uint64_t i = 0; i <= kGgufMaxNestedArrayElements; ++i) many_empty_arrays += empty_array;
  return {
      {"empty file", "", {"bad.gguf", "0 bytes", "too short"}},
      {"short file", std::string("GGUF\3\0\0\0", 8), {"8 bytes", "too short"}},
      {"wrong magic", header(0, 0).s.replace(0, 4, "GGML"), {"magic is 'GGML'", "not a GGUF file"}},
      {"version 1", header(0, 0, 1).s, {"version 1", "obsolete"}},
      {"big-endian", header(0, 0, 0x03000000).s, {"0x3000000", "big-endian"}},
      {"future version", header(0, 0, 4).s, {"version 4 is not supported"}},
      {"absurd kv count", header(0, huge).s, {"claims 4611686018427387904 metadata pairs"}},
      {"absurd tensor count", header(huge, 0).s, {"claims 4611686018427387904 tensors"}},
      {"key longer than the limit",
       header(0, 1).u64(70000).s + std::string(80000, 'k'),
       {"metadata pair 0 of 1", "key at byte 24 is 70000 bytes long", "65535"}},
      {"key past the end",
       header(0, 1).u64(40).raw("short").s + std::string(20, 'x'),
       {"key at byte 24 is 40 bytes long", "file ends"}},
      {"empty key", header(0, 1).str("").u32(0).u8(1).u8(0).s, {"key '' is not a GGUF key"}},
      {"key with a space", header(0, 1).str("a b").u32(0).u8(1).s, {"key 'a b' is not a GGUF key"}},
      {"key with a control byte", header(0, 1).str("a\nb").u32(0).u8(1).s, {"key 'a\\x0ab'"}},
      {"duplicate key",
       header(0, 2).str("k.v").u32(0).u8(1).str("k.v").u32(0).u8(2).s,
       {"metadata key 'k.v'", "appears twice"}},
      {"unknown value type", one_kv(13, "x"), {"metadata key 'k.v'", "value type at byte", "is 13"}},
      {"truncated value type",
       header(0, 1).str("k.v").raw(std::string("\4\0\0", 3)).s,
       {"'k.v'", "value type at byte 35 needs 4 bytes"}},
      {"truncated u64", one_kv(10, "abc"), {"'k.v'", "value at byte 39 needs 8 bytes"}},
      {"bool of 2", one_kv(7, "\2"), {"'k.v'", "bool value", "is 2, expected 0 or 1"}},
      {"string past the end",
       one_kv(8, Bytes().u64(1000).raw("abc").s),
       {"'k.v'", "string value at byte 39 is 1000 bytes long", "file ends"}},
      {"string of 2^64-1 bytes", one_kv(8, Bytes().u64(~uint64_t{0}).s), {"'k.v'", "18446744073709551615 bytes"}},
      {"array of huge length",
       one_kv(9, Bytes().u32(0).u64(huge).s),
       {"'k.v'", "array length", "4611686018427387904 uint8 elements"}},
      {"array of u64 past the end", one_kv(9, Bytes().u32(10).u64(3).u64(1).s), {"3 uint64 elements"}},
      {"array of strings of huge length", one_kv(9, Bytes().u32(8).u64(huge).s), {"string elements"}},
      {"array element string past the end",
       one_kv(9, Bytes().u32(8).u64(2).str("ok").u64(99).s),
       {"'k.v'", "string (array element 1)", "99 bytes long"}},
      {"array of unknown type", one_kv(9, Bytes().u32(77).u64(0).s), {"array element type", "is 77"}},
      {"array of bools with a 3",
       one_kv(9, Bytes().u32(7).u64(3).u8(1).u8(3).u8(0).s),
       {"bool array element 1", "is 3"}},
      {"arrays nested too deep", nested, {"'k.v'", "nest more than 8 deep"}},
      {"too many nested arrays",
       one_kv(9, Bytes().u32(9).u64(kGgufMaxNestedArrayElements + 1).s + many_empty_arrays),
       {"'k.v'", "1048577 arrays", "limit of 1048576 nested array elements"}},
      {"alignment of the wrong type",
       header(0, 1).str("general.alignment").u32(10).u64(32).s,
       {"general.alignment", "uint64 32", "expected a uint32"}},
      {"alignment 0", header(0, 1).str("general.alignment").u32(4).u32(0).s, {"is 0", "power of two"}},
      {"alignment 48", header(0, 1).str("general.alignment").u32(4).u32(48).s, {"is 48", "power of two"}},
      {"alignment 2^21", header(0, 1).str("general.alignment").u32(4).u32(1u << 21).s, {"is 2097152"}},
      {"tensor name too long",
       header(1, 0).tensor(std::string(65, 'n'), {1}, 0, 0).pad().s + std::string(32, '\0'),
       {"tensor info 0", "65 bytes long", "64-byte limit"}},
      {"empty tensor name",
       header(1, 0).tensor("", {1}, 0, 0).pad().s + std::string(32, '\0'),
       {"tensor info 0", "tensor name is empty"}},
      {"tensor name not UTF-8",
       header(1, 0).tensor("w\xff", {1}, 0, 0).pad().s + std::string(32, '\0'),
       {"'w\\xff'", "not valid UTF-8"}},
      {"tensor name with NUL",
       header(1, 0).tensor(std::string("w\0x", 3), {1}, 0, 0).pad().s + std::string(32, '\0'),
       {"without NUL"}},
      {"duplicate tensor",
       header(2, 0).tensor("w", {1}, 0, 0).tensor("w", {1}, 0, 32).pad().s + std::string(64, '\0'),
       {"tensor 'w'", "appears twice"}},
      {"5 dimensions", one_tensor({1, 1, 1, 1, 4}), {"tensor 'w'", "n_dims", "is 5, more than 4"}},
      {"dimension above 2^63", one_tensor({uint64_t{1} << 63}), {"tensor 'w'", "dimension 0", "9223372036854775808"}},
      {"element count overflow",
       one_tensor({uint64_t{1} << 40, uint64_t{1} << 40}),
       {"tensor 'w'", "dimensions [1099511627776, 1099511627776]", "more than 2^63-1 elements"}},
      {"byte count overflow", one_tensor({uint64_t{1} << 62}, 28), {"tensor 'w'", "need more than 2^64 bytes"}},
      {"quantised type", one_tensor({4}, 12), {"tensor 'w'", "Q4_K (12)", "quantised"}},
      {"unknown ggml type", one_tensor({4}, 99), {"tensor 'w'", "is 99, which is not a ggml type"}},
      {"removed ggml type", one_tensor({4}, 4), {"tensor 'w'", "is 4, which is not a ggml type"}},
      {"offset not aligned",
       one_tensor({4}, 0, 8),
       {"tensor 'w'", "data offset", "is 8, not a multiple of the alignment 32"}},
      {"data past the end", one_tensor({4}, 0, 0, 12), {"tensor 'w'", "16 bytes of 4 F32", "12-byte data section"}},
      {"offset past the end", one_tensor({4}, 0, uint64_t{1} << 60), {"tensor 'w'", "offset 1152921504606846976"}},
      {"offset + size wraps", one_tensor({4}, 0, ~uint64_t{31}), {"tensor 'w'", "runs past the end"}},
      {"data section past the end", header(1, 0).tensor("w", {4}, 0, 0).s, {"data section would start at byte 64"}},
      {"truncated tensor info",
       header(1, 0).str("w").u32(2).u64(4).u64(4).u8(0).s,
       {"tensor 'w'", "ggml type at byte", "needs 4 bytes"}},
      {"overlapping tensors",
       header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad().s + std::string(64, '\0'),
       {"tensors 'a' (data offset 0, 64 bytes) and 'b' (data offset 32, 16 bytes) overlap"}},
  };
}

TEST(GgufParse, RejectsMalformedFilesWithClearErrors) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    const std::string message = testing::error_of([&] { parse(c.file); });
    EXPECT_NE(message.find("bad.gguf"), std::string::npos) << message;
    for (const std::string& part : c.parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(GgufParse, AcceptsValidVariants) {
  // The base file of the bad cases is valid.
  GgufLayout one = parse(one_tensor());
  ASSERT_EQ(one.tensors.size(), 1u);
  EXPECT_EQ(one.tensors[0].numel, 4);
  EXPECT_EQ(one.metadata.get_string("general.name"), "m");

  // Version 2 (same layout), no tensors and no padding at all.
  EXPECT_TRUE(parse(header(0, 0, 2).s).tensors.empty());
  // Tensors out of order, gaps between them, zero dims, zero-size tensors sharing an offset.
  const std::string s = header(4, 0)
                            .tensor("b", {4}, 0, 64)
                            .tensor("a", {2, 2}, 30, 0)
                            .tensor("empty", {0, 7}, 0, 64)
                            .tensor("scalar", {}, 0, 96)
                            .pad()
                            .s +
                        std::string(128, '\0');
  GgufLayout l = parse(s);
  EXPECT_EQ(l.tensors[1].type, GgmlType::kBF16);
  EXPECT_EQ(l.tensors[1].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(l.tensors[2].numel, 0);
  EXPECT_TRUE(l.tensors[3].shape.empty());
  EXPECT_EQ(l.tensors[3].numel, 1);
  // A custom alignment moves the data section.
  const std::string a =
      header(1, 1).str("general.alignment").u32(4).u32(256).tensor("w", {4}, 0, 0).pad(256).s + std::string(16, '\0');
  GgufLayout la = parse(a);
  EXPECT_EQ(la.alignment, 256u);
  EXPECT_EQ(la.data_offset, 256u);
}

// A valid file written by GgufWriter, for the sweeps below.
std::string writer_file() {
  testing::TempDir dir;
  GgufWriter w;
  w.set_string("general.architecture", "t");
  w.set("t.arr", GgufValue::strings({"ab", "c"}));
  w.set("t.nest", GgufValue::arrays({GgufValue::bools({true})}));
  const float x[6] = {1, 2, 3, 4, 5, 6};
  w.add_f32("a", {2, 3}, x);
  w.add_f32("b", {3}, x, GgmlType::kBF16);
  w.write(dir.file("s.gguf"));
  return testing::read_file(dir.file("s.gguf"));
}

// Every prefix of a valid file either parses (only trailing padding was cut)
// or fails with a zaya::Error; nothing else escapes.
TEST(GgufParse, EveryTruncationFailsCleanly) {
  const std::string full = writer_file();
  const GgufLayout layout = parse(full);
  uint64_t data_end = 0;
  for (const auto& t : layout.tensors) data_end = std::max(data_end, layout.data_offset + t.offset + t.nbytes);
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string prefix = full.substr(0, n);
    bool ok = true;
    try {
      parse(prefix);
    } catch (const Error&) {
      ok = false;
    }
    EXPECT_EQ(ok, n >= data_end) << "prefix of " << n << " bytes";
  }
}

// Every single-byte corruption either fails with a zaya::Error naming the
// file, or parses to a layout that keeps the parser's promises (gguf_parse.h):
// aligned tensors wholly inside the data section, none overlapping, each of
// the size its type and shape give. A byte of the data section changes no
// layout at all; a byte of the magic always fails.
TEST(GgufParse, ByteCorruptionsFailCleanlyOrKeepTheLayoutsPromises) {
  const std::string full = writer_file();
  const GgufLayout good = parse(full);
  int failed = 0, parsed = 0;
  for (size_t i = 0; i < full.size(); ++i)
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0x01}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff}}) {
      if (static_cast<uint8_t>(full[i]) == v) continue;  // not a corruption
      std::string bad = full;
      bad[i] = static_cast<char>(v);
      const std::string where = fmt::format("byte {} set to {:#04x}", i, v);
      GgufLayout la;
      try {
        la = parse(bad);
      } catch (const Error& e) {
        ++failed;
        EXPECT_EQ(std::string(e.what()).rfind("bad.gguf: ", 0), 0u) << where << ": " << e.what();
        EXPECT_LT(i, good.data_offset) << where << ": the data section's bytes are not checked: " << e.what();
        continue;
      }
      ++parsed;
      EXPECT_GE(i, 4u) << where << ": a file without the GGUF magic parsed";
      EXPECT_EQ(la.data_offset % la.alignment, 0u) << where;
      EXPECT_EQ(la.data_offset + la.data_size, bad.size()) << where;
      std::vector<std::pair<uint64_t, uint64_t>> ranges;
      for (const GgufTensorInfo& t : la.tensors) {
        EXPECT_EQ(t.offset % la.alignment, 0u) << where << ", tensor " << t.name;
        EXPECT_LE(t.offset + t.nbytes, la.data_size) << where << ", tensor " << t.name;
        EXPECT_LE(t.dims.size(), 4u) << where << ", tensor " << t.name;
        int64_t numel = 1;
        for (int64_t d : t.dims) numel *= d;
        EXPECT_EQ(t.numel, numel) << where << ", tensor " << t.name;
        EXPECT_EQ(t.nbytes, ggml_nbytes(t.type, uint64_t(t.numel))) << where << ", tensor " << t.name;
        ranges.emplace_back(t.offset, t.offset + t.nbytes);
      }
      std::sort(ranges.begin(), ranges.end());
      for (size_t r = 1; r < ranges.size(); ++r)
        EXPECT_LE(ranges[r - 1].second, ranges[r].first) << where << ": tensors overlap";
      if (i >= good.data_offset) {  // only tensor bytes changed: the same layout
        EXPECT_EQ(la.data_offset, good.data_offset) << where;
        ASSERT_EQ(la.tensors.size(), good.tensors.size()) << where;
        for (size_t t = 0; t < la.tensors.size(); ++t) {
          EXPECT_EQ(la.tensors[t].name, good.tensors[t].name) << where;
          EXPECT_EQ(la.tensors[t].offset, good.tensors[t].offset) << where;
          EXPECT_EQ(la.tensors[t].shape, good.tensors[t].shape) << where;
        }
      }
    }
  // The sweep reaches both outcomes: the header's corruptions fail, the data's parse.
  EXPECT_GT(failed, 100);
  EXPECT_GT(parsed, 100);
}

}  // namespace
}  // namespace zaya
