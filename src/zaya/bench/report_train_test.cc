// The training section of zaya report from small synthetic metrics: curves
// named by run with validation dashed in the run's colour, learning rate and
// gradient norm, the ranks' step time of a distributed run (straggler records
// interleaved), and the routing heat maps per layer over the steps.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "zaya/bench/report_builder.h"
#include "zaya/report/svg_heatmap.h"
#include "zaya/report/svg_line_plot.h"
#include "zaya/report/xml_test_util.h"

namespace zaya {
namespace {

using testing::parse_xml;
using testing::XmlNode;

// The straight segments of a series' path: its points less one.
long train_line_to_count(const XmlNode& path) {
  const std::string d = path.attr("d");
  return std::count(d.begin(), d.end(), 'L');
}

// A run of `steps` step records with 2 MoE layers (layer 3 skips half its
// tokens, layer 1 none), a validation record every 10 steps, and, when
// `ranks` > 0, a straggler record after every step record.
ReportInput metrics_input(const std::string& path, int steps, int ranks, bool routing = true) {
  ReportInput in;
  in.path = path;
  in.kind = "metrics";
  in.doc = nlohmann::json::array();
  for (int s = 1; s <= steps; ++s) {
    nlohmann::json rec = {
        {"step", s}, {"loss", 8.0 - 0.01 * s}, {"lr", 1e-3 * std::min(1.0, s / 10.0)}, {"grad_norm", 4.0 / s}};
    if (routing)
      rec["routing"] = {{{"layer", 1}, {"load", {0.4, 0.2, 0.2, 0.2}}, {"skip", 0.0}, {"entropy", 1.0}},
                        {{"layer", 3}, {"load", {0.2, 0.1, 0.1, 0.1}}, {"skip", 0.5}, {"entropy", 1.5}}};
    in.doc.push_back(rec);
    if (ranks > 0) in.doc.push_back({{"step", s}, {"rank_step_seconds", {1.0, 1.0 + 0.01 * s}}, {"slowest_rank", 1}});
    if (s % 10 == 0) in.doc.push_back({{"step", s}, {"val_loss", 8.1 - 0.01 * s}});
  }
  return in;
}

std::map<std::string, const ReportFigure*> by_file(const ReportSection& sec) {
  std::map<std::string, const ReportFigure*> out;
  for (const ReportFigure& f : sec.figures) out[f.file] = &f;
  return out;
}

TEST(ReportTrain, CurvesAreNamedByRunWithValidationDashed) {
  const ReportInput a = metrics_input("runs/a/metrics.jsonl", 30, 0), b = metrics_input("runs/b/metrics.jsonl", 20, 2);
  const ReportSection sec = train_report_section({&a, &b});
  const auto figures = by_file(sec);
  ASSERT_TRUE(figures.count("train_loss.svg"));
  auto loss = parse_xml(figures.at("train_loss.svg")->svg);
  auto series = loss->find("path", "series");
  ASSERT_EQ(series.size(), 4u);
  EXPECT_EQ(series[0]->attr("data-name"), "a");
  EXPECT_EQ(series[1]->attr("data-name"), "a validation");
  EXPECT_EQ(series[2]->attr("data-name"), "b");
  EXPECT_EQ(series[3]->attr("data-name"), "b validation");
  EXPECT_EQ(series[1]->attr("stroke"), series[0]->attr("stroke"));
  EXPECT_EQ(series[3]->attr("stroke"), series[2]->attr("stroke"));
  EXPECT_NE(series[0]->attr("stroke"), series[2]->attr("stroke"));
  EXPECT_EQ(series[0]->attr("stroke-dasharray"), "");
  EXPECT_EQ(series[1]->attr("stroke-dasharray"), "6 3");
  EXPECT_EQ(figures.at("train_loss.svg")->svg.find("metrics.jsonl"), std::string::npos);

  // Learning rate and gradient norm, one line per run (straggler records are not steps).
  for (const char* f : {"train_lr.svg", "train_grad_norm.svg"}) {
    ASSERT_TRUE(figures.count(f)) << f;
    auto root = parse_xml(figures.at(f)->svg);
    auto s = root->find("path", "series");
    ASSERT_EQ(s.size(), 2u) << f;
    EXPECT_EQ(s[0]->attr("data-name"), "a");
    EXPECT_EQ(train_line_to_count(*s[1]), 19) << f;  // 20 points
  }
  // The distributed run's ranks: slowest solid, fastest dashed.
  ASSERT_TRUE(figures.count("train_rank_step_time.svg"));
  auto ranks_svg = parse_xml(figures.at("train_rank_step_time.svg")->svg);
  auto ranks = ranks_svg->find("path", "series");
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0]->attr("data-name"), "b slowest rank");
  EXPECT_EQ(ranks[1]->attr("stroke-dasharray"), "6 3");
  // The table names every run.
  EXPECT_NE(sec.html.find("<td>a</td><td>runs/a/metrics.jsonl</td><td>30</td>"), std::string::npos) << sec.html;
  EXPECT_NE(sec.html.find("<td>b</td><td>runs/b/metrics.jsonl</td><td>20</td><td>7.8000</td><td>7.9000</td><td>2</td>"),
            std::string::npos)
      << sec.html;
}

TEST(ReportTrain, RunsOfOneNameAreToldApart) {
  const ReportInput a = metrics_input("x/a/run/metrics.jsonl", 3, 0, false),
                    b = metrics_input("y/a/run/metrics.jsonl", 3, 0, false);
  const ReportSection sec = train_report_section({&a, &b});
  auto series_svg = parse_xml(by_file(sec).at("train_loss.svg")->svg);
  auto series = series_svg->find("path", "series");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0]->attr("data-name"), "x/a/run");
  EXPECT_EQ(series[1]->attr("data-name"), "y/a/run");
  EXPECT_EQ(sec.figures.size(), 3u);  // loss, lr, gradient norm; no routing, no ranks
}

TEST(ReportTrain, AnRlRunPlotsRewardKlFlipRateAndLength) {
  ReportInput rl;
  rl.path = "runs/rl/metrics.jsonl";
  rl.kind = "metrics";
  rl.doc = nlohmann::json::array();
  rl.doc.push_back({{"step", 0}, {"eval_reward", 0.2}});
  for (int s = 1; s <= 6; ++s)
    rl.doc.push_back({{"step", s},
                      {"reward_mean", 0.1 * s},
                      {"loss", 0.01},
                      {"kl_ref", 0.001 * s},
                      {"response_length", 5.0},
                      {"flip_rate", 0.05}});
  rl.doc.push_back({{"step", 6}, {"eval_reward", 0.9}});
  const ReportInput plain = metrics_input("runs/lm/metrics.jsonl", 5, 0, false);
  const ReportSection sec = train_report_section({&plain, &rl});
  const auto figures = by_file(sec);
  for (const char* f : {"rl_reward.svg", "rl_kl.svg", "rl_flip_rate.svg", "rl_length.svg"})
    ASSERT_TRUE(figures.count(f)) << f;
  auto reward_svg = parse_xml(figures.at("rl_reward.svg")->svg);  // the series point into it
  auto series = reward_svg->find("path", "series");
  ASSERT_EQ(series.size(), 2u);  // the training run has no RL records
  EXPECT_EQ(series[0]->attr("data-name"), "rl training (sampled)");
  EXPECT_EQ(series[1]->attr("data-name"), "rl held-out (greedy)");
  EXPECT_EQ(series[1]->attr("stroke-dasharray"), "6 3");
  // Without flip_rate in the records: no flip-rate figure; a language-model run alone: no RL figure.
  for (nlohmann::json& r : rl.doc) r.erase("flip_rate");
  EXPECT_FALSE(by_file(train_report_section({&rl})).count("rl_flip_rate.svg"));
  EXPECT_FALSE(by_file(train_report_section({&plain})).count("rl_reward.svg"));
}

TEST(ReportTrain, RoutingHeatMapsPerLayerOverTheSteps) {
  const ReportInput a = metrics_input("runs/a/metrics.jsonl", 120, 0);
  const ReportSection sec = train_report_section({&a});
  const auto figures = by_file(sec);
  for (const char* kind : {"imbalance", "skip", "entropy", "load"})
    ASSERT_TRUE(figures.count(fmt::format("train_routing_a_{}.svg", kind))) << kind;
  // Skip rate: 120 records averaged 3 to a column; the rows are blocks (half-layers 1 and 3 are the MoE
  // layers of blocks 0 and 1); block 1 skips half its tokens: the middle of the fixed 0-1 scale of a share.
  auto skip = parse_xml(figures.at("train_routing_a_skip.svg")->svg);
  std::vector<std::string> rows;
  for (const XmlNode* t : skip->find("text", "row-label")) rows.push_back(t->text);
  EXPECT_EQ(rows, (std::vector<std::string>{"block 0", "block 1"}));
  auto cells = skip->find("rect", "cell");
  ASSERT_EQ(cells.size(), 2u * 40);
  EXPECT_EQ(cells[0]->attr("fill"), viridis(0));
  EXPECT_EQ(cells[40]->attr("fill"), viridis(0.5));
  std::vector<std::string> cols;
  for (const XmlNode* t : skip->find("text", "col-label")) cols.push_back(t->text);
  EXPECT_EQ(cols, (std::vector<std::string>{"3", "15", "27", "39", "51", "63", "75", "87", "99", "111"}));
  EXPECT_NE(figures.at("train_routing_a_skip.svg")->title.find("a: skip rate per layer (mean of 3 records"),
            std::string::npos);
  // Load imbalance: layer 1's busiest expert has 0.4 of 1.0 over 4 experts (1.6), layer 3's 0.2 of 0.5 (1.6).
  auto imbalance = parse_xml(figures.at("train_routing_a_imbalance.svg")->svg);
  auto ticks = imbalance->find("text", "ctick");
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(ticks.front()->text, "1.0");  // the colour range starts at an even load
  // Expert load over the last records: each expert's share, printed in its cell.
  auto load = parse_xml(figures.at("train_routing_a_load.svg")->svg);
  std::vector<std::string> values;
  for (const XmlNode* t : load->find("text", "value")) values.push_back(t->text);
  EXPECT_EQ(values, (std::vector<std::string>{"0.40", "0.20", "0.20", "0.20", "0.20", "0.10", "0.10", "0.10"}));
  EXPECT_NE(figures.at("train_routing_a_load.svg")->title.find("steps 111-120"), std::string::npos);
}

// Shares are coloured on [0, 1] whatever the data: a run that never skips is
// not drawn on a -1..1 scale (a share cannot be negative), and load shares of
// different runs compare by colour.
TEST(ReportTrain, SharesUseAFixedZeroToOneScale) {
  const ReportInput a = metrics_input("runs/a/metrics.jsonl", 6, 0);
  ReportInput none = a;
  for (nlohmann::json& j : none.doc)
    if (j.contains("routing"))
      for (nlohmann::json& l : j["routing"]) l["skip"] = 0.0;
  const ReportSection sec = train_report_section({&none});
  const auto figures = by_file(sec);
  for (const char* kind : {"skip", "load"}) {
    auto svg = parse_xml(figures.at(fmt::format("train_routing_a_{}.svg", kind))->svg);
    auto ticks = svg->find("text", "ctick");
    ASSERT_FALSE(ticks.empty()) << kind;
    EXPECT_EQ(std::stod(ticks.front()->text), 0.0) << kind;
    EXPECT_EQ(std::stod(ticks.back()->text), 1.0) << kind;
  }
  auto skip = parse_xml(figures.at("train_routing_a_skip.svg")->svg);
  for (const XmlNode* c : skip->find("rect", "cell")) EXPECT_EQ(c->attr("fill"), viridis(0));
}

// Labels that make one file name ("a-b", "a_b") still get a heat map each.
TEST(ReportTrain, RoutingFilesOfOneSlugAreKeptApart) {
  const ReportInput a = metrics_input("x/a-b/metrics.jsonl", 3, 0), b = metrics_input("x/a_b/metrics.jsonl", 3, 0);
  const ReportSection sec = train_report_section({&a, &b});
  const auto figures = by_file(sec);
  ASSERT_TRUE(figures.count("train_routing_a_b_skip.svg"));
  ASSERT_TRUE(figures.count("train_routing_a_b_2_skip.svg"));
  EXPECT_EQ(figures.at("train_routing_a_b_skip.svg")->title.rfind("a-b: ", 0), 0u);
  EXPECT_EQ(figures.at("train_routing_a_b_2_skip.svg")->title.rfind("a_b: ", 0), 0u);
}

// 40 MoE layers still read: one row each, the map grows with them.
TEST(ReportTrain, FortyLayersGetARowEach) {
  ReportInput in;
  in.path = "big/metrics.jsonl";
  in.kind = "metrics";
  in.doc = nlohmann::json::array();
  for (int s = 1; s <= 5; ++s) {
    nlohmann::json routing = nlohmann::json::array();
    for (int l = 0; l < 40; ++l)
      routing.push_back(
          {{"layer", 2 * l + 1}, {"load", std::vector<double>(16, 1.0 / 17)}, {"skip", 1.0 / 17}, {"entropy", 2.0}});
    in.doc.push_back({{"step", s}, {"loss", 5.0}, {"routing", routing}});
  }
  const ReportSection sec = train_report_section({&in});
  const auto figures = by_file(sec);
  auto root = parse_xml(figures.at("train_routing_big_entropy.svg")->svg);
  EXPECT_EQ(root->find("text", "row-label").size(), 40u);
  EXPECT_EQ(root->find("text", "row-label").back()->text, "block 39");
  EXPECT_EQ(root->find("rect", "cell").size(), 40u * 5);
  EXPECT_EQ(root->attr("height"), std::to_string(110 + 16 * 40));
  EXPECT_EQ(parse_xml(figures.at("train_routing_big_load.svg")->svg)->find("rect", "cell").size(), 40u * 16);
}

}  // namespace
}  // namespace zaya
