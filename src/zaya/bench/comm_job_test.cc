// A whole zaya bench comm job on a single-rank world: the plan (context,
// combinations, errors before anything runs), the run (cycles, rows as they
// come), the outcome (wrong elements, the bandwidth gate) and the order of the
// callbacks of run_comm_job. tests/mpi/bench_comm_test.cc runs it on several ranks.
#include "zaya/bench/comm_job.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"
#include "zaya/dist/collective.h"

namespace zaya {
namespace {

using testing::expect_error;

CommJobOptions small_job() {
  CommJobOptions o;
  o.min_bytes = "8";
  o.max_bytes = "512";
  o.step_factor = 8;
  o.iters = 2;
  o.warmup = 1;
  return o;
}

TEST(CommJob, PlanDescribesTheRun) {
  auto world = make_self_comm();
  CommJobOptions o = small_job();
  o.collectives = {"all"};
  o.min_bw = 5;
  const CommJob job(*world, o);
  EXPECT_EQ(job.context().world_ranks, 1);
  EXPECT_EQ(job.context().group_ranks, 1);
  EXPECT_EQ(job.context().groups, 1);
  EXPECT_EQ(job.context().split, "");
  EXPECT_EQ(job.context().rank_lines.size(), 1u);
  EXPECT_EQ(job.context().min_bw, 5);
  EXPECT_EQ(job.options().min_bytes, 8u);
  EXPECT_EQ(job.options().step_factor, 8u);
  // Every collective but send_recv, which needs a second rank.
  ASSERT_EQ(job.combos().size(), all_collectives().size() - 1);
  for (const CommCombo& c : job.combos()) EXPECT_NE(c.coll, Collective::kSendRecv);
  EXPECT_EQ(&job.group(), world.get());
}

TEST(CommJob, SplitAndMatrixReachThePlan) {
  auto world = make_self_comm();
  testing::TempDir dir;
  CommJobOptions o = small_job();
  o.collectives = {"all_to_all_v"};
  o.split = "MOD 4";
  o.matrix = dir.write("m.txt", "1\n");
  const CommJob job(*world, o);
  EXPECT_EQ(job.context().split, "MOD 4");
  EXPECT_NE(&job.group(), world.get());
  ASSERT_TRUE(job.options().matrix.has_value());
  EXPECT_EQ(job.options().matrix->source, o.matrix);
}

TEST(CommJob, PlanErrorsComeBeforeAnyMeasurement) {
  auto world = make_self_comm();
  CommJobOptions o = small_job();
  o.ops = {"avg"};
  o.dtypes = {"int32"};
  expect_error([&] { CommJob job(*world, o); }, "-o avg needs a floating-point data type, got int32");
  o = small_job();
  o.collectives = {"send_recv"};
  expect_error([&] { CommJob job(*world, o); }, "send_recv needs at least 2 ranks per group");
  o = small_job();
  o.iters = 0;
  expect_error([&] { CommJob job(*world, o); }, "iterations (-n) must be at least 1");
}

TEST(CommJob, RunSweepsEveryCycleAndKeepsTheLast) {
  auto world = make_self_comm();
  CommJobOptions o = small_job();
  o.collectives = {"all_reduce", "broadcast"};
  o.cycles = 3;
  CommJob job(*world, o);
  int rows = 0, firsts = 0;
  const CommJobResult r = job.run([&](const CommRun& run, const CommRow& row) {
    ++rows;
    firsts += run.rows.size() == 1;
    EXPECT_EQ(&row, &run.rows.back());
  });
  // 8, 64 and 512 bytes for each of 2 collectives, 3 times.
  EXPECT_EQ(rows, 3 * 2 * 3);
  EXPECT_EQ(firsts, 3 * 2);
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.runs[0].coll, Collective::kAllReduce);
  EXPECT_EQ(r.runs[1].coll, Collective::kBroadcast);
  EXPECT_TRUE(r.summary.verified);
  EXPECT_EQ(r.summary.wrong_total, 0);
  EXPECT_FALSE(r.gate_failed);
}

TEST(CommJob, GateAtNineTenthsOfMinBw) {
  CommBenchSummary s;
  s.avg_busbw = 9;
  EXPECT_FALSE(comm_gate_failed(s, 0));  // no gate
  EXPECT_FALSE(comm_gate_failed(s, 10));
  EXPECT_TRUE(comm_gate_failed(s, 10.01));
  s.avg_busbw = 0;
  EXPECT_TRUE(comm_gate_failed(s, 1e-9));
  EXPECT_NO_THROW(check_comm_result(s, 0));
  expect_error([&] { check_comm_result(s, 2); }, "average bus bandwidth 0 GB/s is below 0.9 x --min-bw 2 GB/s");
  s.wrong_total = 7;  // wrong data is reported first
  expect_error([&] { check_comm_result(s, 2); }, "zaya bench comm: 7 wrong elements");
}

TEST(CommJob, RunCommJobCallsBackThenChecks) {
  auto world = make_self_comm();
  CommJobOptions o = small_job();
  o.fault = "drop-rank";  // one rank: its only contribution becomes zeros
  std::string order;
  int64_t wrong = -1;
  CommJobCallbacks cb;
  cb.on_start = [&](const CommJob& job) {
    order += "start ";
    EXPECT_EQ(job.combos().size(), 1u);
  };
  cb.on_row = [&](const CommRun&, const CommRow&) { order += "row "; };
  cb.on_done = [&](const CommJob&, const CommJobResult& r) {
    order += "done ";
    wrong = r.summary.wrong_total;
  };
  // On one rank the error propagates as it is, after the results were handed over.
  try {
    run_comm_job(*world, o, cb);
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError&) {
    ADD_FAILURE() << "a single rank needs no agreement";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrong elements"), std::string::npos) << e.what();
  }
  EXPECT_EQ(order, "start row row row done ");
  EXPECT_GT(wrong, 0);
  // A planning error: nothing is called back.
  order.clear();
  o.collectives = {"gather"};
  expect_error([&] { run_comm_job(*world, o, cb); }, "unknown collective 'gather'");
  EXPECT_EQ(order, "");
  // Clean run.
  order.clear();
  o = small_job();
  EXPECT_NO_THROW(run_comm_job(*world, o, cb));
  EXPECT_EQ(order, "start row row row done ");
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace zaya
