#include "zaya/report/svg_line_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/report/xml_test_util.h"

namespace zaya {
namespace {

using testing::parse_xml;
using testing::XmlNode;

std::vector<std::string> line_plot_texts(const XmlNode& root, const std::string& cls) {
  std::vector<std::string> out;
  for (const XmlNode* n : root.find("text", cls)) out.push_back(n->text);
  return out;
}

// Path data "M x y L x y ..." as (command, x, y) triples.
struct PathPoint {
  char command;
  double x, y;
};
std::vector<PathPoint> path_points(const std::string& d) {
  std::vector<PathPoint> out;
  std::istringstream in(d);
  std::string cmd;
  while (in >> cmd) {
    PathPoint p{cmd[0], std::stod(cmd.substr(1)), 0};
    in >> p.y;
    out.push_back(p);
  }
  return out;
}

SvgLinePlot loss_plot() {
  LinePlotOptions opt;
  opt.title = "train loss";
  opt.x_label = "step";
  opt.y_label = "loss (nats/token)";
  SvgLinePlot plot(opt);
  std::vector<double> step, a, b;
  for (int i = 0; i <= 100; ++i) {
    step.push_back(i * 10);
    a.push_back(2.0 + 8.0 * std::exp(-i / 20.0));
    b.push_back(2.5 + 7.0 * std::exp(-i / 30.0));
  }
  plot.add_series("lr 3e-3", step, a);
  plot.add_series("lr 1e-3", step, b);
  plot.add_reference_line(1.5, "unigram entropy");
  return plot;
}

TEST(SvgLinePlot, RendersWellFormedSvg) {
  std::string svg = loss_plot().render();
  auto root = parse_xml(svg);
  EXPECT_EQ(root->name, "svg");
  EXPECT_EQ(root->attr("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(root->attr("width"), "800");
  EXPECT_EQ(root->attr("height"), "500");

  auto series = root->find("path", "series");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0]->attr("data-name"), "lr 3e-3");
  EXPECT_NE(series[0]->attr("stroke"), series[1]->attr("stroke"));
  EXPECT_EQ(path_points(series[0]->attr("d")).size(), 101u);

  EXPECT_EQ(line_plot_texts(*root, "title"), (std::vector<std::string>{"train loss"}));
  EXPECT_EQ(line_plot_texts(*root, "xlabel"), (std::vector<std::string>{"step"}));
  EXPECT_EQ(line_plot_texts(*root, "ylabel"), (std::vector<std::string>{"loss (nats/token)"}));
  EXPECT_EQ(line_plot_texts(*root, "xtick"), (std::vector<std::string>{"0", "200", "400", "600", "800", "1000"}));
  // The y axis reaches down to the reference line at 1.5.
  auto yticks = line_plot_texts(*root, "ytick");
  ASSERT_FALSE(yticks.empty());
  EXPECT_LE(std::stod(yticks.front()), 1.5);
  EXPECT_GE(std::stod(yticks.back()), 10.0);
  auto legend = root->find("g", "legend");
  ASSERT_EQ(legend.size(), 1u);
  EXPECT_EQ(line_plot_texts(*legend[0], ""), (std::vector<std::string>{"lr 3e-3", "lr 1e-3"}));
  auto reference = root->find("g", "reference");
  ASSERT_EQ(reference.size(), 1u);
  EXPECT_EQ(line_plot_texts(*reference[0], ""), (std::vector<std::string>{"unigram entropy"}));
}

// A dashed series (validation beside training) keeps the colour it is given and
// is dashed in the legend too; solid series are not.
TEST(SvgLinePlot, DashedSeriesAndTheirLegend) {
  SvgLinePlot plot(LinePlotOptions{});
  plot.add_series("train", {1, 2, 3}, {3, 2, 1});
  plot.add_series("validation", {1, 3}, {3.5, 1.5}, palette_color(0), LineStyle::kDashed);
  plot.add_series("other", {1, 2}, {2, 2});
  auto root = parse_xml(plot.render());
  auto series = root->find("path", "series");
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series[0]->attr("stroke-dasharray"), "");
  EXPECT_EQ(series[1]->attr("stroke-dasharray"), "6 3");
  EXPECT_EQ(series[2]->attr("stroke-dasharray"), "");
  EXPECT_EQ(series[1]->attr("stroke"), series[0]->attr("stroke"));
  EXPECT_EQ(series[0]->attr("stroke"), palette_color(0));
  EXPECT_EQ(series[2]->attr("stroke"), palette_color(2));  // the palette counts every series
  EXPECT_EQ(palette_color(10), palette_color(0));
  auto legend = root->find("g", "legend");
  ASSERT_EQ(legend.size(), 1u);
  auto lines = legend[0]->find("line");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]->attr("stroke-dasharray"), "");
  EXPECT_EQ(lines[1]->attr("stroke-dasharray"), "6 3");
  EXPECT_EQ(lines[1]->attr("stroke"), palette_color(0));
}

// Every drawn point lies inside the frame.
TEST(SvgLinePlot, PointsStayInsideTheFrame) {
  auto root = parse_xml(loss_plot().render());
  auto frame = root->find("rect", "frame");
  ASSERT_EQ(frame.size(), 1u);
  double fx = std::stod(frame[0]->attr("x")), fy = std::stod(frame[0]->attr("y"));
  double fw = std::stod(frame[0]->attr("width")), fh = std::stod(frame[0]->attr("height"));
  for (const XmlNode* s : root->find("path", "series"))
    for (const PathPoint& p : path_points(s->attr("d"))) {
      EXPECT_GE(p.x, fx);
      EXPECT_LE(p.x, fx + fw);
      EXPECT_GE(p.y, fy);
      EXPECT_LE(p.y, fy + fh);
    }
}

TEST(SvgLinePlot, LogAxesTickAtPowersOfTen) {
  LinePlotOptions opt;
  opt.x_scale = AxisScale::kLog10;
  opt.y_scale = AxisScale::kLog10;
  SvgLinePlot plot(opt);
  std::vector<double> bytes, gbps;
  for (double b = 8; b <= 1 << 30; b *= 4) {
    bytes.push_back(b);
    gbps.push_back(b / (b / 150 + 2e3));
  }
  plot.add_series("all-reduce", bytes, gbps);
  auto root = parse_xml(plot.render());
  for (const char* cls : {"xtick", "ytick"}) {
    auto labels = line_plot_texts(*root, cls);
    ASSERT_GE(labels.size(), 2u) << cls;
    for (const auto& l : labels) {
      double e = std::log10(std::stod(l));
      EXPECT_NEAR(e, std::round(e), 1e-9) << cls << " label " << l;
    }
  }
  // x spans 1 .. 1e9: exponent notation throughout; y spans 0.001 .. 1000: plain.
  EXPECT_EQ(line_plot_texts(*root, "xtick").front(), "1e0");
  EXPECT_EQ(line_plot_texts(*root, "xtick").back(), "1e9");
  EXPECT_EQ(line_plot_texts(*root, "ytick").front(), "0.001");
}

TEST(SvgLinePlot, MissingPointsBreakTheLine) {
  SvgLinePlot plot({});
  std::vector<double> x = {0, 1, 2, 3, 4, 5, 6, 7};
  plot.add_series("gappy", x, {1, 2, NAN, 3, 4, NAN, 5, NAN});
  plot.add_series("empty", {NAN, 1}, {1, NAN});
  plot.add_series("inf", {0, 1, 2}, {1, INFINITY, 2});
  auto root = parse_xml(plot.render());
  auto series = root->find("path", "series");
  ASSERT_EQ(series.size(), 3u);
  auto pts = path_points(series[0]->attr("d"));
  ASSERT_EQ(pts.size(), 4u);  // [0,1] and [3,4]; the point at x=6 stands alone
  EXPECT_EQ(pts[0].command, 'M');
  EXPECT_EQ(pts[1].command, 'L');
  EXPECT_EQ(pts[2].command, 'M');
  EXPECT_EQ(pts[3].command, 'L');
  EXPECT_EQ(series[1]->attr("d"), "");
  EXPECT_EQ(root->find("circle").size(), 3u);  // x=6 of "gappy", both ends of "inf"
  for (const auto& l : line_plot_texts(*root, "ytick")) EXPECT_TRUE(std::isfinite(std::stod(l))) << l;
}

TEST(SvgLinePlot, NonPositiveValuesAreMissingOnLogAxes) {
  LinePlotOptions opt;
  opt.y_scale = AxisScale::kLog10;
  SvgLinePlot plot(opt);
  plot.add_series("s", {0, 1, 2, 3}, {10, 0, -5, 1000});
  plot.add_reference_line(-1, "not drawable");
  auto root = parse_xml(plot.render());
  EXPECT_EQ(root->find("path", "series")[0]->attr("d"), "");
  EXPECT_EQ(root->find("circle").size(), 2u);
  EXPECT_TRUE(root->find("g", "reference").empty());
  EXPECT_EQ(line_plot_texts(*root, "ytick").front(), "10");
  EXPECT_EQ(line_plot_texts(*root, "ytick").back(), "1000");
}

TEST(SvgLinePlot, EscapesLabels) {
  LinePlotOptions opt;
  opt.title = R"(<script>alert("x")</script> & co)";
  opt.y_label = "loss\x01\xff";
  SvgLinePlot plot(opt);
  plot.add_series(R"(a "quoted" <name>)", {0, 1}, {0, 1}, R"(red" onload="x)");
  std::string svg = plot.render();
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  auto root = parse_xml(svg);
  EXPECT_EQ(line_plot_texts(*root, "title"), (std::vector<std::string>{opt.title}));
  EXPECT_EQ(line_plot_texts(*root, "ylabel"), (std::vector<std::string>{"loss\xef\xbf\xbd\xef\xbf\xbd"}));
  auto series = root->find("path", "series");
  EXPECT_EQ(series[0]->attr("data-name"), R"(a "quoted" <name>)");
  EXPECT_EQ(series[0]->attr("stroke"), R"(red" onload="x)");
  EXPECT_TRUE(series[0]->attr("onload").empty());
}

TEST(SvgLinePlot, FixedRangesClipTheData) {
  LinePlotOptions opt;
  opt.y_min = 0;
  opt.y_max = 5;
  SvgLinePlot plot(opt);
  plot.add_series("spiky", {0, 1, 2}, {100, 3, 2});
  auto root = parse_xml(plot.render());
  EXPECT_EQ(line_plot_texts(*root, "ytick").front(), "0");
  EXPECT_EQ(line_plot_texts(*root, "ytick").back(), "5");
  bool clipped = false;
  for (const XmlNode* g : root->find("g"))
    if (g->attr("clip-path").rfind("url(#zaya-plot-", 0) == 0) clipped = true;
  EXPECT_TRUE(clipped);
  EXPECT_EQ(root->find("clipPath").size(), 1u);
}

TEST(SvgLinePlot, EmptyPlotStillRenders) {
  auto root = parse_xml(SvgLinePlot({}).render());
  EXPECT_EQ(root->name, "svg");
  EXPECT_TRUE(root->find("path", "series").empty());
  EXPECT_FALSE(line_plot_texts(*root, "xtick").empty());
}

TEST(SvgLinePlot, RejectsBadInput) {
  SvgLinePlot plot({});
  EXPECT_THROW(plot.add_series("s", {1, 2}, {1}), Error);
  LinePlotOptions bad_bound;
  bad_bound.x_scale = AxisScale::kLog10;
  bad_bound.x_min = 0;
  EXPECT_THROW(SvgLinePlot(bad_bound).render(), Error);
  LinePlotOptions empty_range;
  empty_range.y_min = 3;
  empty_range.y_max = 3;
  EXPECT_THROW(SvgLinePlot(empty_range).render(), Error);
  LinePlotOptions tiny;
  tiny.width = 10;
  EXPECT_THROW(SvgLinePlot{tiny}, Error);
}

TEST(SvgLinePlot, SaveWritesTheRenderedDocument) {
  testing::TempDir dir;
  SvgLinePlot plot = loss_plot();
  plot.save(dir.file("loss.svg"));
  EXPECT_EQ(testing::read_file(dir.file("loss.svg")), plot.render());
}

}  // namespace
}  // namespace zaya
