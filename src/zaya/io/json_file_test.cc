// The checked JSON reader: nesting is capped while parsing, parse errors read
// without the library's tag, and values shown in messages are bounded.
#include "zaya/io/json_file.h"

#include <gtest/gtest.h>

#include <string>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/io/atomic_file.h"

namespace zaya {
namespace {

using testing::expect_error;

std::string nested_arrays(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

TEST(JsonFile, NestingUpToTheLimitParses) {
  const nlohmann::json j = parse_json(nested_arrays(kMaxJsonDepth), "x");
  EXPECT_TRUE(j.is_array());
  // Objects count like arrays: 127 objects around one array is 128 levels.
  std::string objects;
  for (int i = 0; i < kMaxJsonDepth - 1; ++i) objects += R"({"a":)";
  objects += "[]" + std::string(size_t(kMaxJsonDepth - 1), '}');
  EXPECT_TRUE(parse_json(objects, "x").is_object());
}

TEST(JsonFile, DeeperNestingIsRefusedNamingTheSourceAndTheLimit) {
  expect_error([] { parse_json(nested_arrays(kMaxJsonDepth + 1), "the request body"); },
               "the request body: JSON nests deeper than 128 levels");
  // 100k levels (the red-team's crashing body) fails the same way, without recursing.
  expect_error([] { parse_json<nlohmann::ordered_json>(nested_arrays(100000), "b"); }, "b: JSON nests deeper than 128");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"type":)";
  expect_error([&] { parse_json(objects, "b"); }, "b: JSON nests deeper than 128");
}

TEST(JsonFile, DeeplyNestedConfigFileIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.file("config.json");
  write_file_atomic(path, R"({"model_type": "zaya", "rope_scaling": )" + nested_arrays(50000) + "}");
  expect_error([&] { read_json_file(path); }, path + ": JSON nests deeper than 128 levels");
  write_file_atomic(path, "{\"a\": 1}\n" + nested_arrays(300) + "\n");
  int lines = 0;
  expect_error([&] { read_json_lines(path, [&](nlohmann::json&&, const std::string&) { return ++lines > 0; }); },
               path + ":2: JSON nests deeper than 128 levels");
  EXPECT_EQ(lines, 1);
}

TEST(JsonFile, ParseErrorsHaveNoLibraryTag) {
  try {
    parse_json("{oops", "the request body");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("[json.exception"), std::string::npos) << what;
    EXPECT_NE(what.find("the request body: invalid JSON: parse error at line 1, column 2"), std::string::npos) << what;
  }
}

TEST(JsonFile, PreviewShowsShortValuesWhole) {
  EXPECT_EQ(json_preview(nlohmann::json(3)), "3");
  EXPECT_EQ(json_preview(nlohmann::json("9")), "\"9\"");
  EXPECT_EQ(json_preview(nlohmann::json::parse(R"({"a":[1,{"b":null}],"c":{}})")), R"({"a":[1,{"b":null}],"c":{}})");
  EXPECT_EQ(json_preview(nlohmann::json::array()), "[]");
}

TEST(JsonFile, PreviewCutsLongValuesAndSaysWhat) {
  const std::string deep = nested_arrays(100);  // 200 characters
  EXPECT_EQ(json_preview(parse_json(deep, "x")), std::string(100, '[') + "... (an array of 200 characters; 100 cut)");
  const std::string s = json_preview(nlohmann::json(std::string(5000, 'a')), 10);
  EXPECT_EQ(s, "\"aaaaaaaaa... (a string of 5002 characters; 4992 cut)");
  // A value deeper than any parsed one (built in code) is still walked without recursion.
  nlohmann::json v = nlohmann::json::array();
  for (int i = 0; i < 20000; ++i) v = nlohmann::json::array({std::move(v)});
  EXPECT_EQ(json_preview(v).substr(0, 100), std::string(100, '['));
  // A multi-byte character is never cut in two.
  const std::string cut = json_preview(nlohmann::json(std::string(200, 'x') + "\u00e9"), 3);
  EXPECT_EQ(cut.substr(0, 4), "\"xx.");
  EXPECT_EQ(json_preview(nlohmann::json("\u00e9\u00e9\u00e9"), 2).substr(0, 5), "\"... ");
}

TEST(JsonFile, FieldErrorsShowABoundedValue) {
  const nlohmann::json j = {{"n", std::string(1000, 'z')}};
  try {
    json_int(j, "cfg.json", "n", 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 300u) << what;
    EXPECT_NE(what.find("cfg.json: \"n\" = \"zzz"), std::string::npos) << what;
    EXPECT_NE(what.find("(a string of 1002 characters; 902 cut) is invalid; expected an integer"), std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace zaya
