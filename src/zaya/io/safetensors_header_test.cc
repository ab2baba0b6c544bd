#include "zaya/io/safetensors_header.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/io/safetensors_file.h"

namespace zaya {
namespace {

// A safetensors file: 8-byte little-endian header length, header, data.
std::string st_bytes(std::string_view header, std::string_view data = "", uint64_t length_field = ~uint64_t{0}) {
  uint64_t n = length_field == ~uint64_t{0} ? header.size() : length_field;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  out.append(header);
  out.append(data);
  return out;
}

std::span<const uint8_t> st_span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

SafetensorsLayout parse_st(const std::string& file) {
  return parse_safetensors_layout("model.safetensors", st_span(file));
}

struct StBadCase {
  const char* what;
  std::string file;
  std::vector<std::string> message_parts;  // each must appear in the error
};

std::vector<StBadCase> st_bad_cases() {
  const std::string data16(16, '\0');
  auto one = [&](const std::string& entry) { return st_bytes(R"({"w":)" + entry + "}", data16); };
  return {
      {"shorter than the length field", "abc", {"3 bytes", "too short"}},
      {"absurd header length", st_bytes("{}", "", 200'000'000), {"200000000", "exceeds"}},
      {"header past end of file", st_bytes("{}", "", 64), {"header length 64", "past the end of the file"}},
      {"empty header", st_bytes(""), {"invalid JSON"}},
      {"truncated JSON", st_bytes(R"({"w": {"dtype")"), {"invalid JSON"}},
      {"invalid UTF-8", st_bytes("{\"w\xff\": 1}"), {"invalid JSON"}},
      {"root is an array", st_bytes("[1, 2]"), {"JSON array, expected an object"}},
      {"root is a string", st_bytes(R"("x")"), {"JSON string, expected an object"}},
      {"root is a number", st_bytes("42"), {"JSON number, expected an object"}},
      {"entry not an object", one("5"), {"tensor 'w'", "entry is a JSON number"}},
      {"missing dtype", one(R"({"shape": [4], "data_offsets": [0, 16]})"), {"tensor 'w'", "missing field 'dtype'"}},
      {"missing shape", one(R"({"dtype": "F32", "data_offsets": [0, 16]})"), {"missing field 'shape'"}},
      {"missing offsets", one(R"({"dtype": "F32", "shape": [4]})"), {"missing field 'data_offsets'"}},
      {"unknown field",
       one(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 16], "x": 1})"),
       {"unknown field 'x'"}},
      {"dtype not a string",
       one(R"({"dtype": 4, "shape": [4], "data_offsets": [0, 16]})"),
       {"field 'dtype' is a JSON number"}},
      {"unknown dtype",
       one(R"({"dtype": "F128", "shape": [4], "data_offsets": [0, 16]})"),
       {"unknown dtype 'F128'", "BF16"}},
      {"shape not an array",
       one(R"({"dtype": "F32", "shape": 4, "data_offsets": [0, 16]})"),
       {"field 'shape' is a JSON number"}},
      {"negative dimension", one(R"({"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]})"), {"shape[0] is -4"}},
      {"fractional dimension",
       one(R"({"dtype": "F32", "shape": [2, 1.5], "data_offsets": [0, 16]})"),
       {"shape[1] is 1.5"}},
      {"dimension past int64",
       one(R"({"dtype": "U8", "shape": [9223372036854775808], "data_offsets": [0, 16]})"),
       {"shape[0] is 9223372036854775808", "larger than"}},
      {"dimension past uint64",
       one(R"({"dtype": "U8", "shape": [18446744073709551616], "data_offsets": [0, 16]})"),
       {"shape[0]", "non-negative integer"}},
      {"element count overflows",
       one(R"({"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]})"),
       {"more than 2^63-1 elements"}},
      {"byte size overflows",
       one(R"({"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 16]})"),
       {"span 16 bytes"}},
      {"offsets not an array",
       one(R"({"dtype": "F32", "shape": [4], "data_offsets": 16})"),
       {"field 'data_offsets' is 16", "[begin, end]"}},
      {"offsets wrong length", one(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 8, 16]})"), {"[begin, end]"}},
      {"negative offset",
       one(R"({"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]})"),
       {"data_offsets[0] is -16"}},
      {"begin after end",
       one(R"({"dtype": "F32", "shape": [1], "data_offsets": [10, 4]})"),
       {"data_offsets [10, 4] has begin > end"}},
      {"offsets past the data",
       one(R"({"dtype": "F32", "shape": [8], "data_offsets": [0, 32]})"),
       {"data_offsets [0, 32] run past the end of the data buffer (16 bytes)"}},
      {"huge offsets",
       one(R"({"dtype": "F32", "shape": [4], "data_offsets": [18446744073709551600, 18446744073709551615]})"),
       {"run past the end"}},
      {"size mismatch",
       one(R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 16]})"),
       {"span 16 bytes, but shape [3] of F32 needs 12"}},
      {"overlap",
       st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                data16),
       {"tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) overlap"}},
      {"duplicate tensor",
       st_bytes(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                    "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                data16),
       {"tensor 'a' appears twice"}},
      {"duplicate field",
       one(R"({"dtype": "F32", "dtype": "U8", "shape": [4], "data_offsets": [0, 16]})"),
       {"tensor 'w': field 'dtype' appears twice"}},
      {"duplicate metadata key",
       st_bytes(R"({"__metadata__": {"k": "1", "k": "2"}})"),
       {"__metadata__ key 'k' appears twice"}},
      {"duplicate metadata", st_bytes(R"({"__metadata__": {}, "__metadata__": {}})"), {"__metadata__ appears twice"}},
      {"metadata not an object", st_bytes(R"({"__metadata__": ["x"]})"), {"__metadata__ is a JSON array"}},
      {"metadata value not a string",
       st_bytes(R"({"__metadata__": {"step": 5}})"),
       {"__metadata__ value for key 'step' is a JSON number"}},
      {"nesting in shape",
       one(R"({"dtype": "F32", "shape": [[4]], "data_offsets": [0, 16]})"),
       {"tensor 'w'", "nests deeper"}},
      {"deep nesting", st_bytes(R"({"w": {"a": {"b": {"c": {}}}}})"), {"nests deeper"}},
      {"very deep root array",
       st_bytes(std::string(100000, '[') + std::string(100000, ']')),
       {"JSON array, expected an object"}},
      {"very deep objects",
       st_bytes([] {
         std::string s;
         for (int i = 0; i < 100000; ++i) s += R"({"a":)";
         return s + "1" + std::string(100000, '}');
       }()),
       {"nests deeper"}},
  };
}

// Every malformed file is rejected with a zaya::Error naming the file and the
// problem, both from memory and through SafetensorsFile::open on disk.
TEST(SafetensorsHeader, RejectsMalformedFiles) {
  testing::TempDir dir;
  for (const StBadCase& c : st_bad_cases()) {
    SCOPED_TRACE(c.what);
    for (bool from_disk : {false, true}) {
      std::string message;
      try {
        if (from_disk)
          SafetensorsFile::open(dir.write("model.safetensors", c.file));
        else
          parse_st(c.file);
        ADD_FAILURE() << "accepted: " << c.what;
      } catch (const Error& e) {
        message = e.what();
      }
      EXPECT_NE(message.find("model.safetensors: "), std::string::npos) << message;
      for (const auto& part : c.message_parts) EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }
}

TEST(SafetensorsHeader, MessageNamesFileTensorAndField) {
  std::string file =
      st_bytes(R"({"model.layers.3.input_norm.weight": {"dtype": "F32", "shape": [1], "data_offsets": [10, 4]}})",
               std::string(16, '\0'));
  try {
    parse_st(file);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model.safetensors: tensor 'model.layers.3.input_norm.weight': data_offsets [10, 4] has begin > end");
  }
}

TEST(SafetensorsHeader, ControlCharactersInNamesAreEscaped) {
  try {
    parse_st(st_bytes(R"({"a\u001b[31mb": 1})"));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'a\\x1b[31mb'"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsHeader, AcceptsGapsEmptyTensorsScalarsAndPadding) {
  // 'a' at [0, 8), a 4-byte gap, 'b' at [12, 14), trailing bytes after it;
  // 'e' is empty and 's' a scalar; header padded with spaces as writers do.
  std::string file = st_bytes(R"(  {"__metadata__": {"format": "pt"},
      "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "e": {"dtype": "BF16", "shape": [3, 0], "data_offsets": [4, 4]},
      "b": {"dtype": "I16", "shape": [1], "data_offsets": [12, 14]},
      "s": {"dtype": "F64", "shape": [], "data_offsets": [16, 24]}}     )",
                              std::string(30, '\0'));
  SafetensorsLayout layout = parse_st(file);
  ASSERT_EQ(layout.tensors.size(), 4u);
  EXPECT_EQ(layout.tensors[0].name, "a");
  EXPECT_EQ(layout.tensors[1].name, "e");
  EXPECT_EQ(layout.tensors[1].numel, 0);
  EXPECT_EQ(layout.tensors[1].shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(layout.tensors[2].dtype, SafetensorsDtype::kI16);
  EXPECT_EQ(layout.tensors[3].numel, 1);
  EXPECT_TRUE(layout.tensors[3].shape.empty());
  EXPECT_EQ(layout.metadata.at("format"), "pt");
  EXPECT_EQ(layout.data_size, 30u);
  EXPECT_EQ(layout.data_start + layout.data_size, file.size());
}

TEST(SafetensorsHeader, AcceptsEmptyFile) {
  SafetensorsLayout layout = parse_st(st_bytes("{}"));
  EXPECT_TRUE(layout.tensors.empty());
  EXPECT_TRUE(layout.metadata.empty());
  EXPECT_EQ(layout.data_size, 0u);
}

// A small in-process fuzz: random byte flips and truncations of a valid file
// must either parse into a layout whose ranges are all in bounds or throw
// zaya::Error, never anything else.
TEST(SafetensorsHeader, MutatedFilesFailCleanly) {
  const std::string valid = st_bytes(R"({"__metadata__": {"k": "v"},
      "w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
      "b": {"dtype": "I64", "shape": [1], "data_offsets": [16, 24]}})",
                                     std::string(24, '\x01'));
  ASSERT_NO_THROW(parse_st(valid));
  std::mt19937 rng(1234);
  const std::string alphabet = "{}[]\":,-0123456789eE. \x00\xff";
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string file = valid;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % file.size();
      switch (rng() % 4) {
        case 0: file[pos] = static_cast<char>(rng()); break;
        case 1: file[pos] = alphabet[rng() % alphabet.size()]; break;
        case 2: file.resize(pos); break;
        default: file.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      }
      if (file.empty()) break;
    }
    try {
      SafetensorsLayout layout = parse_st(file);
      ++accepted;
      ASSERT_EQ(layout.data_start + layout.data_size, file.size());
      for (const auto& t : layout.tensors) {
        ASSERT_LE(t.begin, t.end);
        ASSERT_LE(t.end, layout.data_size);
        ASSERT_EQ(t.nbytes(), static_cast<uint64_t>(t.numel) * dtype_size(t.dtype));
      }
    } catch (const Error&) {
    }
  }
  // Some mutations (inside the data buffer) leave the file valid.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace zaya
