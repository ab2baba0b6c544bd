#include "zaya/bench/report_builder.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>

#include "zaya/bench/comm_bench.h"
#include "zaya/bench/gemm_table.h"
#include "zaya/bench/membw_bench.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::TempDir;

std::string count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return std::to_string(n);
}

TEST(Report, BuildsEverySectionFromBenchmarkJson) {
  TempDir dir;
  // bench comm on 2 and 4 ranks.
  for (int ranks : {2, 4}) {
    CommRun run;
    run.coll = Collective::kAllReduce;
    run.has_op = true;
    run.group_ranks = ranks;
    for (uint64_t size : {1024u, 65536u}) {
      CommRow row;
      row.size_bytes = size;
      row.count = int64_t(size / 4);
      row.out_of_place = {true, 10, double(size) / 1e4, double(size) / 1e4, 0, {}};
      row.in_place = row.out_of_place;
      run.rows.push_back(row);
    }
    CommBenchContext ctx;
    ctx.world_ranks = ctx.group_ranks = ranks;
    testing::write_file(dir.file("comm" + std::to_string(ranks) + ".json"),
                        comm_bench_json(CommBenchOptions{}, ctx, {run}).dump());
  }
  // bench gemm, a 2 x 2 sweep.
  GemmEfficiencyTable t;
  t.peak_gflops["f32"] = 100;
  for (int64_t m : {64, 128})
    for (int64_t n : {64, 256}) {
      GemmTableEntry e;
      e.shape = {m, n, 64, false, false};
      e.gflops = double(m + n) / 4;
      e.efficiency = e.gflops / 100;
      e.seconds = 1e-5;
      t.entries.push_back(e);
    }
  testing::write_file(dir.file("gemm.json"), t.to_json().dump());
  // bench membw.
  MembwOptions mo;
  std::vector<MembwPoint> pts;
  for (uint64_t ws : {16384u, 65536u}) pts.push_back({"triad", 1, ws, ws, 100, 1, 50.0, 40.0});
  testing::write_file(dir.file("membw.json"), membw_json(mo, pts).dump());
  // metrics.jsonl of zaya train, and something unknown.
  testing::write_file(dir.file("metrics.jsonl"), "{\"step\":1,\"loss\":7.5}\n{\"step\":2,\"loss\":7.0}\n");
  testing::write_file(dir.file("other.json"), "{\"hello\":1}");

  std::vector<ReportInput> inputs;
  for (const char* f : {"comm2.json", "comm4.json", "gemm.json", "membw.json", "metrics.jsonl", "other.json"})
    inputs.push_back(load_report_input(dir.file(f)));
  EXPECT_EQ(inputs[0].kind, "comm");
  EXPECT_EQ(inputs[4].kind, "metrics");
  EXPECT_EQ(inputs[5].kind, "");
  const Report r = build_report(inputs, "test <report>");
  ASSERT_EQ(r.sections.size(), 4u);  // comm, gemm, membw, train
  EXPECT_EQ(r.sections[0].id, "comm");
  // One plot per collective (both rank counts in it) and one overview per rank count.
  ASSERT_EQ(r.sections[0].figures.size(), 3u);
  EXPECT_EQ(r.sections[0].figures[0].file, "comm_all_reduce.svg");
  EXPECT_NE(r.sections[0].figures[0].svg.find("2 ranks"), std::string::npos);
  EXPECT_NE(r.sections[0].figures[0].svg.find("4 ranks"), std::string::npos);
  ASSERT_EQ(r.sections[1].figures.size(), 1u);  // one heat map: f32 nn K=64
  EXPECT_NE(r.sections[1].figures[0].svg.find("class=\"cell\""), std::string::npos);
  const std::string html = render_report_html(r);
  EXPECT_EQ(count_of(html, "<svg"), std::to_string(3 + 1 + 1 + 1));
  EXPECT_EQ(html.find("<?xml"), std::string::npos);  // inlined without declarations
  EXPECT_NE(html.find("test &lt;report&gt;"), std::string::npos);
  EXPECT_NE(html.find("not recognised"), std::string::npos);
  const std::vector<std::string> files = write_report(r, dir.file("out"));
  EXPECT_EQ(files.size(), 7u);
  for (const std::string& f : files) EXPECT_TRUE(std::filesystem::exists(f)) << f;
  testing::write_file(dir.file("bad.json"), "{not json");
  testing::expect_error([&] { load_report_input(dir.file("bad.json")); }, "bad.json: invalid JSON");
}

// Two runs of zaya train and a bench infer document: a training section with
// the runs named by their directories, the routing maps, and an inference section.
TEST(Report, RunsAndInferenceMakeTheirSections) {
  TempDir dir;
  for (const char* run : {"lr1", "lr2"}) {
    std::filesystem::create_directories(dir.file(run));
    std::string lines;
    for (int s = 1; s <= 3; ++s)
      lines += fmt::format(
          "{{\"step\":{},\"loss\":{},\"lr\":1e-3,\"grad_norm\":2.0,\"routing\":[{{\"layer\":1,\"load\":[0.5,0.5],"
          "\"skip\":0.1,\"entropy\":0.6}}]}}\n",
          s, 8 - s);
    testing::write_file(dir.file(std::string(run) + "/metrics.jsonl"), lines + "{\"step\":3,\"val_loss\":5.5}\n");
  }
  testing::write_file(
      dir.file("infer.json"),
      R"({"bench":"infer","model":"tiny","prefill":[{"tokens":16,"seconds":0.01,"tokens_per_second":1600}],)"
      R"("decode":[{"batch":1,"context":64,"ms_per_step":2,"tokens_per_second":500,"roofline_ms":1}]})");
  std::vector<ReportInput> inputs;
  for (const char* f : {"lr1/metrics.jsonl", "lr2/metrics.jsonl", "infer.json"})
    inputs.push_back(load_report_input(dir.file(f)));
  EXPECT_EQ(inputs[2].kind, "infer");
  const Report r = build_report(inputs, "runs");
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.sections[0].id, "train");
  EXPECT_EQ(r.sections[1].id, "infer");
  const std::string html = render_report_html(r);
  for (const char* want :
       {"data-name=\"lr1\"", "data-name=\"lr2 validation\"", "train_lr.svg", "train_grad_norm.svg",
        "train_routing_lr2_skip.svg", "train_routing_lr1_entropy.svg", "train_routing_lr1_imbalance.svg",
        "id=\"infer\"", "infer_decode_infer.svg", "infer_prefill.svg"})
    EXPECT_NE(html.find(want), std::string::npos) << want;
}

// The page title says what the page is (red-team L18: a training report was
// titled "cluster characterization"); --title still overrides it.
TEST(Report, TitleFromTheContent) {
  auto input = [](const std::string& path, const std::string& kind) {
    ReportInput in;
    in.path = path;
    in.kind = kind;
    return in;
  };
  const ReportInput tiny = input("runs/tiny/metrics.jsonl", "metrics"), gemm = input("gemm.json", "gemm"),
                    infer = input("infer.json", "infer");
  EXPECT_EQ(report_title({tiny}), "zaya.cpp training report: tiny");
  EXPECT_EQ(report_title({tiny, input("runs/lr2/metrics.jsonl", "metrics"), input("a/metrics.jsonl", "metrics"),
                          input("b/metrics.jsonl", "metrics"), infer}),
            "zaya.cpp training report: tiny, lr2, a and 1 more");
  EXPECT_EQ(report_title({infer}), "zaya.cpp inference benchmark");
  EXPECT_EQ(report_title({tiny, gemm}), "zaya.cpp cluster characterization");
  EXPECT_EQ(report_title({gemm}), "zaya.cpp cluster characterization");
  ReportInput run = tiny;
  run.doc = nlohmann::json::array({{{"step", 1}, {"loss", 7.0}}, {{"step", 2}, {"loss", 6.5}}});
  EXPECT_EQ(build_report({run}, "").title, "zaya.cpp training report: tiny");
  EXPECT_EQ(build_report({run}, "mine").title, "mine");
}

}  // namespace
}  // namespace zaya
