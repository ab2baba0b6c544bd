// zaya report's input list (directories expanded, in name order) and its
// --json summary.
#include "zaya/bench/report_inputs.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(ReportInputs, DirectoriesStandForTheirJsonFiles) {
  testing::TempDir dir;
  const std::string b = dir.write("b.json", "{}");
  const std::string a = dir.write("a.jsonl", "{}\n");
  dir.write("notes.txt", "not an input");
  std::filesystem::create_directory(dir.file("sub.json"));  // a directory, not a file
  const std::string other = dir.write("elsewhere.txt", "{}");
  EXPECT_EQ(expand_report_inputs({other, dir.path(), other}), (std::vector<std::string>{other, a, b, other}));
  testing::TempDir empty;
  empty.write("readme.md", "");
  expect_error([&] { expand_report_inputs({empty.path()}); },
               empty.path() + ": no .json or .jsonl files in this directory");
}

TEST(ReportInputs, SummaryNamesInputsAndOutputs) {
  ReportInput known, unknown;
  known.path = "comm.json";
  known.kind = "comm";
  unknown.path = "x.json";
  const nlohmann::json j = report_summary_json("out", {"out/a.svg", "out/index.html"}, {known, unknown});
  EXPECT_EQ(j["verb"], "report");
  EXPECT_EQ(j["out"], "out");
  EXPECT_EQ(j["files"], (nlohmann::json{"out/a.svg", "out/index.html"}));
  ASSERT_EQ(j["inputs"].size(), 2u);
  EXPECT_EQ(j["inputs"][0]["path"], "comm.json");
  EXPECT_EQ(j["inputs"][0]["kind"], "comm");
  EXPECT_EQ(j["inputs"][1]["kind"], "");
  // The key order of the written file (nlohmann::json sorts keys).
  EXPECT_EQ(j.dump(), R"({"files":["out/a.svg","out/index.html"],"inputs":[{"kind":"comm","path":"comm.json"},)"
                      R"({"kind":"","path":"x.json"}],"out":"out","verb":"report"})");
}

}  // namespace
}  // namespace zaya
