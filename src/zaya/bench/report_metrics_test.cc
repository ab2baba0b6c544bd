// metrics.jsonl as zaya report reads it: step, validation, straggler and
// routing records apart, phase records and other lines passed over, and each
// run named by its directory.
#include "zaya/bench/report_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

namespace zaya {
namespace {

TEST(ReportMetrics, RunsAreNamedByTheirDirectory) {
  EXPECT_EQ(run_label("runs/my/metrics.jsonl"), "my");
  EXPECT_EQ(run_label("/home/u/work/runs/my/metrics.jsonl"), "my");
  EXPECT_EQ(run_label("run/metrics.jsonl"), "run");
  EXPECT_EQ(run_label("./runs/my/./metrics.jsonl"), "my");
  EXPECT_EQ(run_label("bj/run1.jsonl"), "run1");
  EXPECT_EQ(run_label("run1.jsonl"), "run1");
  EXPECT_EQ(run_label("metrics.jsonl"), std::filesystem::current_path().filename().string());
  // The longer name, for runs of one name.
  EXPECT_EQ(run_path_label("x/a/run/metrics.jsonl"), "x/a/run");
  EXPECT_EQ(run_path_label("./runs/my/./metrics.jsonl"), "runs/my");
  EXPECT_EQ(run_path_label("/abs/my/metrics.jsonl"), "/abs/my");
  EXPECT_EQ(run_path_label("bj/run1.jsonl"), "bj/run1");
  EXPECT_EQ(run_path_label("metrics.jsonl"), run_label("metrics.jsonl"));
}

TEST(ReportMetrics, AnRlRunsRewardKlFlipRateAndLengthAreRead) {
  const nlohmann::json lines = nlohmann::json::parse(R"([
    {"step":0,"eval_reward":0.25,"eval_prompts":40},
    {"step":1,"reward_mean":0.5,"reward_std":0.1,"response_length":4.5,"loss":-0.01,"kl_ref":0.0,"grad_norm":1.0},
    {"step":2,"reward_mean":0.75,"response_length":4.0,"loss":0.02,"kl_ref":0.003,"flip_rate":0.125},
    {"step":2,"eval_reward":0.875,"eval_prompts":40}
  ])");
  const RunMetrics r = read_run_metrics(lines, "runs/rl/metrics.jsonl");
  EXPECT_EQ(r.steps, (std::vector<double>{1, 2}));
  EXPECT_EQ(r.reward, (std::vector<double>{0.5, 0.75}));
  EXPECT_EQ(r.kl, (std::vector<double>{0.0, 0.003}));
  EXPECT_EQ(r.length, (std::vector<double>{4.5, 4.0}));
  ASSERT_EQ(r.flip_rate.size(), 2u);
  EXPECT_TRUE(std::isnan(r.flip_rate[0]));
  EXPECT_EQ(r.flip_rate[1], 0.125);
  EXPECT_EQ(r.eval_steps, (std::vector<double>{0, 2}));
  EXPECT_EQ(r.eval_reward, (std::vector<double>{0.25, 0.875}));
  EXPECT_TRUE(r.val_steps.empty());
}

TEST(ReportMetrics, RecordsOfEachKindAreReadApart) {
  const nlohmann::json lines = nlohmann::json::parse(R"([
    {"step":1,"phase":1,"name":"short","steps":10},
    {"step":1,"loss":8.5,"lr":1e-4,"grad_norm":3.5,"routing":[
       {"layer":1,"load":[0.5,0.25,0.125,0.125],"skip":0.0,"entropy":1.2},
       {"layer":3,"load":[0.25,0.25,0.25,0.125],"skip":0.125,"entropy":1.3}]},
    {"step":2,"rank_step_seconds":[1.5,2.5,2.0],"slowest_rank":1},
    {"step":2,"loss":7.5,"lr":2e-4,"grad_norm":2.5,"skipped":"spike"},
    {"step":2,"val_loss":7.75},
    "not an object",
    {"loss":1.0},
    {"step":3,"loss":7.0}
  ])");
  const RunMetrics r = read_run_metrics(lines, "runs/a/metrics.jsonl");
  EXPECT_EQ(r.label, "a");
  EXPECT_EQ(r.steps, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(r.loss, (std::vector<double>{8.5, 7.5, 7.0}));
  ASSERT_EQ(r.lr.size(), 3u);
  EXPECT_EQ(r.lr[1], 2e-4);
  EXPECT_TRUE(std::isnan(r.lr[2]));  // a record without it
  EXPECT_EQ(r.grad_norm[0], 3.5);
  EXPECT_EQ(r.val_steps, std::vector<double>{2});
  EXPECT_EQ(r.val_loss, std::vector<double>{7.75});
  EXPECT_EQ(r.rank_steps, std::vector<double>{2});
  EXPECT_EQ(r.slowest_seconds, std::vector<double>{2.5});
  EXPECT_EQ(r.fastest_seconds, std::vector<double>{1.5});
  EXPECT_EQ(r.ranks, 3);
  ASSERT_EQ(r.routing.size(), 1u);
  EXPECT_EQ(r.routing[0].step, 1);
  ASSERT_EQ(r.routing[0].layers.size(), 2u);
  EXPECT_EQ(r.routing[0].layers[1].layer, 3);
  EXPECT_EQ(r.routing[0].layers[1].load, (std::vector<double>{0.25, 0.25, 0.25, 0.125}));
  EXPECT_EQ(r.routing[0].layers[1].skip, 0.125);
  EXPECT_EQ(r.routing[0].layers[0].entropy, 1.2);
  // Not an array: an empty run.
  EXPECT_TRUE(read_run_metrics(nlohmann::json::object(), "x/metrics.jsonl").steps.empty());
}

}  // namespace
}  // namespace zaya
