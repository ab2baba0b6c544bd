#include "zaya/report/svg_heatmap.h"

#include <gtest/gtest.h>

#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/report/xml_test_util.h"

namespace zaya {
namespace {

using testing::parse_xml;
using testing::XmlNode;

std::vector<std::string> texts(const XmlNode& root, const std::string& cls) {
  std::vector<std::string> out;
  for (const XmlNode* n : root.find("text", cls)) out.push_back(n->text);
  return out;
}

TEST(SvgHeatmap, RendersCellsLabelsAndColorBar) {
  HeatmapOptions opt;
  opt.title = "bf16 GEMM efficiency";
  opt.x_label = "N";
  opt.y_label = "M";
  opt.value_label = "fraction of peak";
  SvgHeatmap map(opt, {"512", "1024", "4096"}, {"256", "2048"}, {0.41, 0.55, 0.63, 0.72, NAN, 0.88});
  auto root = parse_xml(map.render());
  EXPECT_EQ(root->name, "svg");
  auto cells = root->find("rect", "cell");
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ(cells[4]->attr("fill"), "#dddddd");  // the NaN cell
  EXPECT_NE(cells[0]->attr("fill"), cells[5]->attr("fill"));
  EXPECT_EQ(texts(*root, "value"), (std::vector<std::string>{"0.41", "0.55", "0.63", "0.72", "0.88"}));
  EXPECT_EQ(texts(*root, "row-label"), (std::vector<std::string>{"512", "1024", "4096"}));
  EXPECT_EQ(texts(*root, "col-label"), (std::vector<std::string>{"256", "2048"}));
  EXPECT_EQ(texts(*root, "title"), (std::vector<std::string>{"bf16 GEMM efficiency"}));
  EXPECT_EQ(texts(*root, "value-label"), (std::vector<std::string>{"fraction of peak"}));
  auto cticks = texts(*root, "ctick");
  ASSERT_GE(cticks.size(), 3u);
  EXPECT_LE(std::stod(cticks.front()), 0.41);
  EXPECT_GE(std::stod(cticks.back()), 0.88);
  // Low values are dark (white text), high values light (dark text).
  auto values = root->find("text", "value");
  EXPECT_EQ(values.front()->attr("fill"), "white");
  EXPECT_EQ(values.back()->attr("fill"), "#222");
  // The cells' group renders without anti-aliasing, so abutting cells leave no white seam between them.
  auto groups = root->find("g", "cells");
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->attr("shape-rendering"), "crispEdges");
}

TEST(SvgHeatmap, FixedRangeAndNoCellText) {
  HeatmapOptions opt;
  opt.v_min = 0;
  opt.v_max = 1;
  opt.cell_text = false;
  SvgHeatmap map(opt, {"a"}, {"b", "c"}, {0.0, 1.0});
  auto root = parse_xml(map.render());
  auto cells = root->find("rect", "cell");
  EXPECT_EQ(cells[0]->attr("fill"), viridis(0));
  EXPECT_EQ(cells[1]->attr("fill"), viridis(1));
  EXPECT_TRUE(texts(*root, "value").empty());
  EXPECT_EQ(texts(*root, "ctick").front(), "0");
  EXPECT_EQ(texts(*root, "ctick").back(), "1.0");
}

TEST(SvgHeatmap, EscapesAndRotatesLongLabels) {
  HeatmapOptions opt;
  opt.title = "a < b & c";
  std::vector<std::string> cols;
  for (int j = 0; j < 12; ++j) cols.push_back("M=N=K=" + std::to_string(1 << (j + 4)) + " \"bf16\"");
  SvgHeatmap map(opt, {"<row>"}, cols, std::vector<double>(12, 1.0));
  auto root = parse_xml(map.render());
  EXPECT_EQ(texts(*root, "title"), (std::vector<std::string>{"a < b & c"}));
  EXPECT_EQ(texts(*root, "row-label"), (std::vector<std::string>{"<row>"}));
  auto labels = root->find("text", "col-label");
  ASSERT_EQ(labels.size(), 12u);
  EXPECT_NE(labels[0]->attr("transform").find("rotate(-45)"), std::string::npos);
  EXPECT_EQ(labels[0]->text, cols[0]);
}

// Many narrow columns (training steps): every k-th is labelled, upright when k columns hold the label.
TEST(SvgHeatmap, LabelsEveryKthColumn) {
  HeatmapOptions opt;
  opt.col_label_every = 10;
  opt.cell_text = false;
  std::vector<std::string> cols;
  for (int j = 0; j < 45; ++j) cols.push_back(std::to_string(100 * (j + 1)));
  SvgHeatmap map(opt, {"layer 1", "layer 3"}, cols, std::vector<double>(90, 0.5));
  auto root = parse_xml(map.render());
  EXPECT_EQ(root->find("rect", "cell").size(), 90u);
  EXPECT_EQ(texts(*root, "col-label"), (std::vector<std::string>{"100", "1100", "2100", "3100", "4100"}));
  EXPECT_EQ(root->find("text", "col-label")[0]->attr("transform"), "");
  opt.col_label_every = 1;  // each label alone does not fit its column
  auto all = parse_xml(SvgHeatmap(opt, {"layer 1", "layer 3"}, cols, std::vector<double>(90, 0.5)).render());
  ASSERT_EQ(all->find("text", "col-label").size(), 45u);
  EXPECT_NE(all->find("text", "col-label")[0]->attr("transform").find("rotate(-45)"), std::string::npos);
  opt.col_label_every = 0;
  testing::expect_error([&] { SvgHeatmap(opt, {"a"}, {"b"}, {1.0}); }, "col_label_every 0 is invalid");
}

TEST(SvgHeatmap, EmptyMapSaysSo) {
  auto root = parse_xml(SvgHeatmap({}, {}, {}, {}).render());
  EXPECT_TRUE(root->find("rect", "cell").empty());
  bool found = false;
  for (const XmlNode* t : root->find("text"))
    if (t->text == "no data") found = true;
  EXPECT_TRUE(found);
}

TEST(SvgHeatmap, RejectsBadInput) {
  EXPECT_THROW(SvgHeatmap({}, {"a", "b"}, {"c"}, {1.0}), Error);
  HeatmapOptions bad;
  bad.v_min = 2;
  bad.v_max = 1;
  EXPECT_THROW(SvgHeatmap(bad, {"a"}, {"b"}, {1.0}), Error);
}

TEST(SvgHeatmap, ViridisEndpoints) {
  EXPECT_EQ(viridis(0), "#440154");
  EXPECT_EQ(viridis(1), "#fde725");
  EXPECT_EQ(viridis(-3), "#440154");
  EXPECT_EQ(viridis(NAN), "#440154");
}

}  // namespace
}  // namespace zaya
