// zaya bench comm's flags resolved: names and "all" lists, sizes and their
// flag-naming errors, and the combinations a run measures.
#include "zaya/bench/comm_job_options.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(CommJobOptions, DefaultsAreNcclTestsDefaults) {
  const CommJobSettings s = resolve_comm_job_options({});
  EXPECT_EQ(s.bench.collectives, std::vector<Collective>{Collective::kAllReduce});
  EXPECT_EQ(s.bench.dtypes, std::vector<DType>{DType::kF32});
  EXPECT_EQ(s.bench.ops, std::vector<ReduceOp>{ReduceOp::kSum});
  EXPECT_EQ(s.bench.min_bytes, uint64_t(32) << 20);
  EXPECT_EQ(s.bench.max_bytes, uint64_t(32) << 20);
  EXPECT_EQ(s.bench.step_bytes, uint64_t(1) << 20);
  EXPECT_EQ(s.bench.fault, CommFault::kNone);
  EXPECT_FALSE(s.bench.matrix.has_value());
  EXPECT_FALSE(s.all_ops);
  EXPECT_EQ(s.split.op, SplitSpec::Op::kNone);
}

TEST(CommJobOptions, NamesListsAndAll) {
  CommJobOptions o;
  o.collectives = {"alltoallv", "bcast", "reduce_scatter_perf"};
  o.dtypes = {"bfloat16", "int64"};
  o.ops = {"max", "avg"};
  o.min_bytes = "4K";
  o.max_bytes = "1.5M";
  o.step_bytes = "64KiB";
  o.fault = "off-by-one";
  o.split = "mod 8";
  o.iters = 7;
  o.root = 3;
  o.time_stat = "median";
  CommJobSettings s = resolve_comm_job_options(o);
  EXPECT_EQ(s.bench.collectives,
            (std::vector<Collective>{Collective::kAllToAllV, Collective::kBroadcast, Collective::kReduceScatter}));
  EXPECT_EQ(s.bench.dtypes, (std::vector<DType>{DType::kBF16, DType::kI64}));
  EXPECT_EQ(s.bench.ops, (std::vector<ReduceOp>{ReduceOp::kMax, ReduceOp::kAvg}));
  EXPECT_EQ(s.bench.min_bytes, 4096u);
  EXPECT_EQ(s.bench.max_bytes, 1572864u);
  EXPECT_EQ(s.bench.step_bytes, 65536u);
  EXPECT_EQ(s.bench.fault, CommFault::kOffByOne);
  EXPECT_EQ(s.bench.iters, 7);
  EXPECT_EQ(s.bench.root, 3);
  EXPECT_EQ(s.bench.time_stat, "median");
  EXPECT_EQ(s.split.op, SplitSpec::Op::kMod);
  EXPECT_EQ(s.split.value, 8u);
  EXPECT_FALSE(s.all_ops);

  // "all" stands for every name, in the order `all` runs them.
  o.collectives = {"all"};
  o.dtypes = {"all"};
  o.ops = {"all"};
  s = resolve_comm_job_options(o);
  EXPECT_EQ(s.bench.collectives, all_collectives());
  EXPECT_EQ(s.bench.dtypes, all_dtypes());
  EXPECT_EQ(s.bench.ops, all_reduce_ops());
  EXPECT_TRUE(s.all_ops);
}

TEST(CommJobOptions, ErrorsNameTheFlag) {
  auto with = [](auto set) {
    CommJobOptions o;
    set(o);
    return [o] { resolve_comm_job_options(o); };
  };
  expect_error(with([](CommJobOptions& o) { o.collectives = {"gather"}; }), "unknown collective 'gather'");
  expect_error(with([](CommJobOptions& o) { o.collectives.clear(); }), "no collective to run");
  expect_error(with([](CommJobOptions& o) { o.min_bytes = "3X"; }), "-b/--minbytes");
  expect_error(with([](CommJobOptions& o) { o.max_bytes = "big"; }), "-e/--maxbytes");
  expect_error(with([](CommJobOptions& o) { o.step_bytes = "-1"; }), "-i/--stepbytes");
  expect_error(with([](CommJobOptions& o) { o.dtypes = {"fp8"}; }), "fp8");
  expect_error(with([](CommJobOptions& o) { o.ops = {"xor"}; }), "xor");
  expect_error(with([](CommJobOptions& o) { o.fault = "flaky"; }), "unknown fault 'flaky'");
  expect_error(with([](CommJobOptions& o) { o.split = "FOO 2"; }), "--split 'FOO 2': unknown operation 'FOO'");
  expect_error(with([](CommJobOptions& o) {
                 o.raw = true;
                 o.timeout = 5;
               }),
               "--raw calls the MPI library directly, without the Comm layer's deadline: drop -T 5 or --raw");
}

TEST(CommJobOptions, RawModeIsPassedOn) {
  CommJobOptions o;
  EXPECT_FALSE(resolve_comm_job_options(o).bench.raw);
  o.raw = true;
  EXPECT_TRUE(resolve_comm_job_options(o).bench.raw);
}

CommBenchOptions bench_of(std::vector<Collective> c, std::vector<DType> t, std::vector<ReduceOp> op) {
  CommBenchOptions o;
  o.collectives = std::move(c);
  o.dtypes = std::move(t);
  o.ops = std::move(op);
  return o;
}

TEST(CommJobOptions, CombosInOrderOnceForCollectivesThatDoNotReduce) {
  const CommBenchOptions o = bench_of({Collective::kAllGather, Collective::kAllReduce}, {DType::kF32, DType::kI32},
                                      {ReduceOp::kSum, ReduceOp::kMax});
  const std::vector<CommCombo> c = comm_combos(o, false, 2);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].coll, Collective::kAllGather);
  EXPECT_EQ(c[0].dtype, DType::kF32);
  EXPECT_EQ(c[0].op, ReduceOp::kSum);
  EXPECT_EQ(c[1].coll, Collective::kAllGather);
  EXPECT_EQ(c[1].dtype, DType::kI32);
  EXPECT_EQ(c[2].coll, Collective::kAllReduce);
  EXPECT_EQ(c[2].op, ReduceOp::kSum);
  EXPECT_EQ(c[3].op, ReduceOp::kMax);
  EXPECT_EQ(c[5].dtype, DType::kI32);
  EXPECT_EQ(c[5].op, ReduceOp::kMax);
}

TEST(CommJobOptions, AvgNeedsAFloatingTypeUnlessEveryOpWasAsked) {
  const CommBenchOptions o =
      bench_of({Collective::kAllReduce}, {DType::kF32, DType::kI32}, {ReduceOp::kSum, ReduceOp::kAvg});
  expect_error([&] { comm_combos(o, false, 2); }, "-o avg needs a floating-point data type, got int32");
  // -o all: int32 runs every op but avg.
  const std::vector<CommCombo> c = comm_combos(o, true, 2);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1].op, ReduceOp::kAvg);
  EXPECT_EQ(c[1].dtype, DType::kF32);
  EXPECT_EQ(c[2].dtype, DType::kI32);
  EXPECT_EQ(c[2].op, ReduceOp::kSum);
  // avg on a collective that does not reduce is no combination at all.
  EXPECT_EQ(comm_combos(bench_of({Collective::kBroadcast}, {DType::kI32}, {ReduceOp::kAvg}), false, 2).size(), 1u);
}

TEST(CommJobOptions, SendRecvNeedsTwoRanksPerGroup) {
  const CommBenchOptions alone = bench_of({Collective::kSendRecv}, {DType::kF32}, {ReduceOp::kSum});
  expect_error([&] { comm_combos(alone, false, 1); }, "send_recv needs at least 2 ranks per group");
  EXPECT_EQ(comm_combos(alone, false, 2).size(), 1u);
  // With other collectives it is left out on a single rank.
  const CommBenchOptions some =
      bench_of({Collective::kAllReduce, Collective::kSendRecv}, {DType::kF32, DType::kBF16}, {ReduceOp::kSum});
  const std::vector<CommCombo> c = comm_combos(some, false, 1);
  ASSERT_EQ(c.size(), 2u);
  for (const CommCombo& x : c) EXPECT_EQ(x.coll, Collective::kAllReduce);
  EXPECT_EQ(comm_combos(some, false, 4).size(), 4u);
}

}  // namespace
}  // namespace zaya
