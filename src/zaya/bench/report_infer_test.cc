// The inference section of zaya report from `zaya bench infer --json`
// documents (infer/benchmark.cc writes them): a row per file, prefill and
// decode tokens/s per setting, the decode-vs-roofline plot per file and one
// prefill plot over every file.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "zaya/bench/report_builder.h"
#include "zaya/report/xml_test_util.h"

namespace zaya {
namespace {

using testing::parse_xml;
using testing::XmlNode;

// The straight segments of a series' path: its points less one.
long line_to_count(const XmlNode& path) {
  const std::string d = path.attr("d");
  return std::count(d.begin(), d.end(), 'L');
}

// A bench infer document: prefill at 16 and 64 tokens, decode at batch 1 and
// 4 over contexts 128 and 512.
ReportInput infer_input(const std::string& path, const std::string& model, double scale) {
  nlohmann::json d = {{"bench", "infer"},
                      {"model", model},
                      {"weights_dtype", "bf16"},
                      {"threads", 8},
                      {"bf16_activations", true},
                      {"dram_gbps", 20.5},
                      {"weight_bytes", {{"dense", 1e6}, {"per_expert", 2e5}, {"lm_head", 5e5}, {"total", 3e6}}},
                      {"prefill", nlohmann::json::array()},
                      {"decode", nlohmann::json::array()}};
  for (int t : {16, 64})
    d["prefill"].push_back({{"tokens", t}, {"seconds", t / (1000.0 * scale)}, {"tokens_per_second", 1000.0 * scale}});
  for (int b : {1, 4})
    for (int c : {128, 512})
      d["decode"].push_back({{"batch", b},
                             {"context", c},
                             {"ms_per_step", 2.0 * c / 128 / scale},
                             {"tokens_per_second", b * 500.0 * scale * 128 / c},
                             {"bytes_per_step", 2.5e6},
                             {"roofline_ms", 0.5},
                             {"ratio_to_roofline", 4.0},
                             {"working_set_roofline_ms", 0.25}});
  ReportInput in;
  in.path = path;
  in.kind = "infer";
  in.doc = d;
  return in;
}

TEST(ReportInfer, TokensPerSecondPerSettingAndThePlots) {
  const ReportInput a = infer_input("out/tiny.json", "tiny", 1), b = infer_input("out/small.json", "small", 2);
  const ReportSection sec = infer_report_section({&a, &b});
  EXPECT_EQ(sec.id, "infer");
  // The run table, a decode row per (file, batch, context), a prefill row per (file, prompt length).
  EXPECT_NE(
      sec.html.find("<td>tiny.json</td><td>tiny</td><td>bf16</td><td>8</td><td>bf16</td><td>20.5</td><td>3.0</td>"),
      std::string::npos)
      << sec.html;
  EXPECT_NE(sec.html.find("<td>small.json</td><td>4</td><td>128</td><td>1.000</td><td>4000.0</td><td>2.50</td>"
                          "<td>0.500</td><td>4.00</td><td>0.250</td>"),
            std::string::npos)
      << sec.html;
  EXPECT_NE(sec.html.find("<td>tiny.json</td><td>64</td><td>0.0640</td><td>1000</td>"), std::string::npos) << sec.html;
  EXPECT_NE(sec.html.find("<th>tokens/s</th>"), std::string::npos);

  std::map<std::string, const ReportFigure*> figures;
  for (const ReportFigure& f : sec.figures) figures[f.file] = &f;
  ASSERT_EQ(sec.figures.size(), 3u);
  ASSERT_TRUE(figures.count("infer_decode_tiny.svg"));
  ASSERT_TRUE(figures.count("infer_decode_small.svg"));
  ASSERT_TRUE(figures.count("infer_prefill.svg"));
  // Decode: a line per batch over the contexts, each with its roofline dashed in its colour.
  auto decode_svg = parse_xml(figures.at("infer_decode_tiny.svg")->svg);
  auto decode = decode_svg->find("path", "series");
  ASSERT_EQ(decode.size(), 4u);
  EXPECT_EQ(decode[0]->attr("data-name"), "batch 1");
  EXPECT_EQ(decode[1]->attr("data-name"), "batch 1 roofline");
  EXPECT_EQ(decode[1]->attr("stroke"), decode[0]->attr("stroke"));
  EXPECT_EQ(decode[1]->attr("stroke-dasharray"), "6 3");
  EXPECT_EQ(decode[2]->attr("data-name"), "batch 4");
  // Prefill: one line per file.
  auto prefill_svg = parse_xml(figures.at("infer_prefill.svg")->svg);
  auto prefill = prefill_svg->find("path", "series");
  ASSERT_EQ(prefill.size(), 2u);
  EXPECT_EQ(prefill[0]->attr("data-name"), "tiny (tiny.json)");
  EXPECT_EQ(prefill[1]->attr("data-name"), "small (small.json)");
}

// More batch sizes than contexts: a line per context over the batch sizes.
TEST(ReportInfer, DecodeLinesFollowTheLongerSweep) {
  ReportInput in = infer_input("b.json", "m", 1);
  in.doc["decode"] = nlohmann::json::array();
  for (int b : {1, 2, 4, 8}) in.doc["decode"].push_back({{"batch", b}, {"context", 256}, {"ms_per_step", 1.0 + b}});
  in.doc["prefill"] = nlohmann::json::array();
  const ReportSection sec = infer_report_section({&in});
  ASSERT_EQ(sec.figures.size(), 1u);  // no prefill plot without prefill points
  auto series_svg = parse_xml(sec.figures[0].svg);
  auto series = series_svg->find("path", "series");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0]->attr("data-name"), "context 256");
  EXPECT_EQ(line_to_count(*series[0]), 3);
  EXPECT_NE(sec.figures[0].svg.find("batch (sequences)"), std::string::npos);
}

}  // namespace
}  // namespace zaya
