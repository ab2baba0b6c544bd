// `zaya bench comm`'s driver on 2, 3 and 4 ranks: every collective verifies
// with zero wrong elements, a deliberately wrong reduction and a corrupted
// result are caught by the verification, groups split like NCCL_TESTS_SPLIT,
// all_to_all_v follows an imbalanced traffic matrix, and the job's set-up
// (bench/comm_groups.h, comm_job.h) gives every rank the same groups, matrix
// and errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/bench/comm_bench.h"
#include "zaya/bench/comm_groups.h"
#include "zaya/bench/comm_job.h"
#include "zaya/bench/comm_split.h"
#include "zaya/core/error.h"
#include "zaya/dist/collective.h"

namespace zaya {
namespace {

using testing::world;

CommBenchOptions small_sweep() {
  CommBenchOptions o;
  o.min_bytes = 64;
  o.max_bytes = 4096;
  o.step_factor = 8;
  o.iters = 3;
  o.warmup = 1;
  o.check = 2;
  return o;
}

int64_t total_wrong(const CommRun& run) {
  int64_t wrong = 0;
  for (const CommRow& row : run.rows)
    for (const CommSample* s : {&row.out_of_place, &row.in_place})
      if (s->ran) {
        EXPECT_GE(s->wrong, 0);
        wrong += s->wrong;
      }
  return wrong;
}

// --raw: the same harness on the group's raw view (the MPI calls without the
// layer) verifies every collective exactly too, and a drop-rank fault is caught.
TEST(BenchComm, RawViewVerifiesEveryCollectiveAndCatchesAWrongReduction) {
  Comm& w = world();
  std::unique_ptr<Comm> raw = w.raw_view();
  EXPECT_EQ(raw->size(), w.size());
  EXPECT_EQ(raw->rank(), w.rank());
  CommBenchOptions o = small_sweep();
  o.raw = true;
  {
    CommBench bench(w, *raw, o);
    for (Collective c : all_collectives()) EXPECT_EQ(total_wrong(bench.run(c, DType::kF32, ReduceOp::kAvg)), 0);
  }
  if (w.size() < 2) return;
  o.fault = CommFault::kDropRank;
  CommBench bad(w, *raw, o);
  EXPECT_GT(total_wrong(bad.run(Collective::kAllReduce, DType::kF32, ReduceOp::kSum)), 0);
}

TEST(BenchComm, EveryCollectiveVerifiesExactly) {
  Comm& w = world();
  CommBenchOptions o = small_sweep();
  o.root = w.size() - 1;
  CommBench bench(w, w, o);
  for (Collective c : all_collectives())
    for (DType t : {DType::kF32, DType::kBF16, DType::kI32}) {
      CommRun run = bench.run(c, t, ReduceOp::kSum);
      ASSERT_EQ(run.rows.size(), 3u) << collective_name(c);
      EXPECT_EQ(total_wrong(run), 0) << collective_name(c) << " " << dtype_name(t);
      const CommRow& last = run.rows.back();
      EXPECT_EQ(last.out_of_place.ran, collective_has_out_of_place(c));
      EXPECT_EQ(last.in_place.ran, collective_has_in_place(c));
      const CommSample& s = last.out_of_place.ran ? last.out_of_place : last.in_place;
      EXPECT_GT(s.time_us, 0);
      EXPECT_EQ(s.iter_us.n, o.iters);
      EXPECT_LE(s.iter_us.min, s.iter_us.max);
      EXPECT_GT(s.algbw, 0) << collective_name(c);
    }
}

TEST(BenchComm, EveryOpAndTypeOfAllReduceVerifies) {
  Comm& w = world();
  CommBenchOptions o = small_sweep();
  o.min_bytes = o.max_bytes = 1000;
  // Verification only: one timed and one checked operation per form (many
  // combinations, and each operation is slow on oversubscribed ranks).
  o.iters = 1;
  o.warmup = 0;
  o.check = 1;
  CommBench bench(w, w, o);
  for (DType t : all_dtypes())
    for (ReduceOp op : all_reduce_ops()) {
      if (!comm_combination_valid(Collective::kAllReduce, t, op)) continue;
      EXPECT_EQ(total_wrong(bench.run(Collective::kAllReduce, t, op)), 0) << dtype_name(t) << " " << reduce_op_name(op);
      EXPECT_EQ(total_wrong(bench.run(Collective::kReduceScatter, t, op)), 0)
          << dtype_name(t) << " " << reduce_op_name(op);
    }
}

// A reduction that misses one rank's contribution gives wrong sums, and the
// verification says so on every size and form.
TEST(BenchComm, WrongReductionIsCaught) {
  Comm& w = world();
  CommBenchOptions o = small_sweep();
  o.fault = CommFault::kDropRank;
  CommBench bench(w, w, o);
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce}) {
    CommRun run = bench.run(c, DType::kF32, ReduceOp::kSum);
    for (const CommRow& row : run.rows) {
      EXPECT_GT(row.out_of_place.wrong, 0) << collective_name(c) << " size " << row.size_bytes;
      EXPECT_GT(row.in_place.wrong, 0) << collective_name(c) << " size " << row.size_bytes;
    }
  }
}

// One corrupted element per checked operation is counted exactly once.
TEST(BenchComm, SingleCorruptedElementIsCountedExactly) {
  Comm& w = world();
  CommBenchOptions o = small_sweep();
  o.fault = CommFault::kOffByOne;
  o.check = 3;  // stops at the first failing check, as nccl-tests does
  CommBench bench(w, w, o);
  for (Collective c : all_collectives()) {
    if (c == Collective::kReduce && w.size() - 1 != o.root) {
      // Only the root's result is checked; the last rank is not the root here.
      EXPECT_EQ(total_wrong(bench.run(c, DType::kF64, ReduceOp::kMax)), 0);
      continue;
    }
    CommRun run = bench.run(c, DType::kF64, ReduceOp::kMax);
    for (const CommRow& row : run.rows) {
      if (row.out_of_place.ran) {
        EXPECT_EQ(row.out_of_place.wrong, 1) << collective_name(c) << " " << row.size_bytes;
      }
      if (row.in_place.ran) {
        EXPECT_EQ(row.in_place.wrong, 1) << collective_name(c) << " " << row.size_bytes;
      }
    }
  }
}

TEST(BenchComm, TimeStatisticsAndAveraging) {
  Comm& w = world();
  for (const char* stat : {"median", "min"}) {
    CommBenchOptions o = small_sweep();
    o.iters = 7;
    o.time_stat = stat;
    o.average = 3;
    CommBench bench(w, w, o);
    const CommRun run = bench.run(Collective::kAllReduce, DType::kF32, ReduceOp::kSum);
    for (const CommRow& row : run.rows) {
      const SampleStats& it = row.out_of_place.iter_us;
      EXPECT_DOUBLE_EQ(row.out_of_place.time_us, std::string(stat) == "median" ? it.p50 : it.min);
      EXPECT_NEAR(row.out_of_place.algbw, double(row.count) * 4 / 1e3 / row.out_of_place.time_us,
                  1e-9 * row.out_of_place.algbw);
    }
  }
  CommBenchOptions bad = small_sweep();
  bad.time_stat = "p90";
  EXPECT_THROW(CommBench(w, w, bad), Error);
}

TEST(BenchComm, SplitGroupsRunInParallel) {
  Comm& w = world();
  if (w.size() % 2 != 0) GTEST_SKIP() << "MOD 2 needs an even rank count";
  const SplitSpec split = parse_split("MOD 2");
  auto group = w.split(split_color(split, w.rank()), w.rank(), "bench-group");
  ASSERT_EQ(group->size(), w.size() / 2);
  CommBenchOptions o = small_sweep();
  o.fault = CommFault::kOffByOne;
  o.check = 1;
  CommBench bench(w, *group, o);
  CommRun run = bench.run(Collective::kAllReduce, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(run.group_ranks, w.size() / 2);
  // Both groups' last ranks corrupt one element each: #wrong is summed over the world.
  for (const CommRow& row : run.rows) EXPECT_EQ(row.out_of_place.wrong, 2);
}

TEST(BenchComm, AllToAllVFollowsTheTrafficMatrix) {
  Comm& w = world();
  const int n = w.size();
  TrafficMatrix m;
  m.n = n;
  m.source = "skewed";
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) m.w.push_back(j == 0 ? 3.0 * n : double(1 + (i + j) % 3));
  CommBenchOptions o = small_sweep();
  o.max_bytes = 1 << 16;
  o.matrix = m;
  CommBench bench(w, w, o);
  CommRun run = bench.run(Collective::kAllToAllV, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(total_wrong(run), 0);
  EXPECT_GT(run.imbalance, 1.2);
  EXPECT_EQ(run.matrix_source, "skewed");
  const CommSample& s = run.rows.back().out_of_place;
  EXPECT_GT(s.algbw, s.busbw);  // the diagonal share does not cross the bus
  // A uniform matrix reproduces all_to_all's bandwidth definitions.
  CommBenchOptions u = small_sweep();
  CommBench uniform(w, w, u);
  CommRun ur = uniform.run(Collective::kAllToAllV, DType::kF32, ReduceOp::kSum);
  const CommSample& us = ur.rows.back().out_of_place;
  EXPECT_NEAR(us.busbw, us.algbw * double(n - 1) / double(n), 1e-9 * us.algbw);
  EXPECT_DOUBLE_EQ(ur.imbalance, 1.0);
}

TEST(BenchCommJob, GroupsMustBeEqual) {
  Comm& w = world();
  const CommGroups whole = split_comm_groups(w, parse_split(""), "");
  EXPECT_EQ(whole.group, &w);
  EXPECT_EQ(whole.groups, 1);
  // One rank per "node" of two: two groups when the ranks divide evenly, else an error on every rank.
  const SplitSpec div2 = parse_split("DIV 2");
  if (w.size() % 2 == 0) {
    const CommGroups g = split_comm_groups(w, div2, "DIV 2");
    EXPECT_EQ(g.groups, w.size() / 2);
    EXPECT_EQ(g.group->size(), 2);
    EXPECT_EQ(g.color, w.rank() / 2);
  } else {
    try {
      split_comm_groups(w, div2, "DIV 2");
      ADD_FAILURE() << "uneven groups accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--split 'DIV 2' makes groups of different sizes (1 to 2 ranks)"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(BenchCommJob, MatrixIsReadOnRankZeroOnly) {
  Comm& w = world();
  const std::string path = ::testing::TempDir() + "bench_comm_job_matrix.txt";
  if (w.rank() == 0) {
    std::ofstream out(path);
    for (int i = 0; i < w.size(); ++i)
      for (int j = 0; j < w.size(); ++j) out << (i == j ? 0 : i + 1) << (j + 1 < w.size() ? " " : "\n");
  }
  w.barrier();
  // The other ranks name a file that does not exist: only rank 0's is read.
  CommMatrixSource source;
  source.matrix = w.rank() == 0 ? path : path + ".not-here";
  const std::optional<TrafficMatrix> m = load_comm_matrix(w, w.size(), source);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->n, w.size());
  EXPECT_EQ(m->source, path);
  EXPECT_DOUBLE_EQ(m->at(w.size() - 1, 0), double(w.size()));
  // Rank 0's error reaches every rank, word for word.
  source.matrix = path + ".missing";
  std::string message;
  try {
    load_comm_matrix(w, w.size(), source);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(path + ".missing"), std::string::npos) << message;
  check_same_on_all_ranks(w, message, "the matrix error");
  w.barrier();
  if (w.rank() == 0) std::remove(path.c_str());
}

TEST(BenchCommJob, RankLinesComeFromEveryRank) {
  Comm& w = world();
  const std::vector<std::string> lines = comm_rank_lines(w, w.rank() % 2);
  ASSERT_EQ(int(lines.size()), w.size());
  for (int r = 0; r < w.size(); ++r)
    EXPECT_EQ(lines[size_t(r)].rfind(fmt::format("Rank {:3} Group {:3} Pid", r, r % 2), 0), 0u) << lines[size_t(r)];
}

TEST(BenchCommJob, PlansAndRunsOnEveryRank) {
  Comm& w = world();
  CommJobOptions o;
  o.collectives = {"all_reduce", "send_recv"};
  o.min_bytes = "64";
  o.max_bytes = "4K";
  o.step_factor = 8;
  o.iters = 2;
  o.warmup = 1;
  CommJob job(w, o);
  EXPECT_EQ(job.context().world_ranks, w.size());
  EXPECT_EQ(job.context().rank_lines.size(), size_t(w.size()));
  ASSERT_EQ(job.combos().size(), 2u);  // send_recv runs: the group has 2 ranks or more
  const CommJobResult r = job.run();
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.summary.wrong_total, 0);
  EXPECT_TRUE(r.summary.verified);
  EXPECT_GT(r.summary.avg_busbw, 0);
}

}  // namespace
}  // namespace zaya
