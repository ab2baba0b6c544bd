// Single-process tests of the collective benchmark's pieces: geometry and
// bandwidth conventions, verifiable data, rank splitting, traffic matrices.
// (The multi-rank runs are in tests/mpi/bench_comm_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/bench/comm_bench.h"
#include "zaya/bench/comm_collectives.h"
#include "zaya/bench/comm_data.h"
#include "zaya/bench/comm_split.h"
#include "zaya/bench/traffic_matrix.h"
#include "zaya/core/bf16.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(CommCollectives, GeometryFollowsNcclTests) {
  // 1 MiB of floats on 4 ranks.
  const uint64_t bytes = 1 << 20;
  CollGeometry ar = coll_geometry(Collective::kAllReduce, bytes, 4, 4);
  EXPECT_EQ(ar.count, 262144);
  EXPECT_EQ(ar.size_bytes, bytes);
  CollGeometry rs = coll_geometry(Collective::kReduceScatter, bytes, 4, 4);
  EXPECT_EQ(rs.count, 65536);  // per-rank receive count
  EXPECT_EQ(rs.send_elems, 262144);
  EXPECT_EQ(rs.size_bytes, bytes);
  CollGeometry ag = coll_geometry(Collective::kAllGather, bytes, 4, 4);
  EXPECT_EQ(ag.count, 65536);  // per-rank send count
  EXPECT_EQ(ag.recv_elems, 262144);
  CollGeometry a2a = coll_geometry(Collective::kAllToAll, bytes, 4, 4);
  EXPECT_EQ(a2a.count, 65536);  // per peer
  EXPECT_EQ(a2a.send_elems, 262144);
  // Sizes that do not divide: counts round down, the size column shows what moves.
  CollGeometry odd = coll_geometry(Collective::kAllGather, 100, 4, 3);
  EXPECT_EQ(odd.count, 8);
  EXPECT_EQ(odd.size_bytes, 96u);
}

TEST(CommCollectives, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kSendRecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllReduce, 1), 0.0);
  // all_reduce of 1e9 bytes in 1 s on 4 ranks: algbw 1, busbw 1.5.
  Bandwidth b = coll_bandwidth(Collective::kAllReduce, 250000000, 4, 1.0, 4);
  EXPECT_DOUBLE_EQ(b.algbw, 1.0);
  EXPECT_DOUBLE_EQ(b.busbw, 1.5);
  // all_gather: S = count * e * n.
  b = coll_bandwidth(Collective::kAllGather, 62500000, 4, 1.0, 4);
  EXPECT_DOUBLE_EQ(b.algbw, 1.0);
  EXPECT_DOUBLE_EQ(b.busbw, 0.75);
}

TEST(CommCollectives, NamesAndAliases) {
  EXPECT_EQ(parse_collective("all_reduce"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("all_reduce_perf"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("allreduce"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("alltoallv"), Collective::kAllToAllV);
  EXPECT_EQ(parse_collective("sendrecv"), Collective::kSendRecv);
  EXPECT_EQ(parse_collective("bcast"), Collective::kBroadcast);
  EXPECT_EQ(parse_collective("reducescatter"), Collective::kReduceScatter);
  expect_error([] { parse_collective("gather"); }, "unknown collective 'gather'; allowed: all_reduce");
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  expect_error([] { parse_dtype("fp8"); }, "unknown data type 'fp8'");
  EXPECT_EQ(parse_reduce_op("avg"), ReduceOp::kAvg);
  expect_error([] { parse_reduce_op("mulsum"); }, "unknown reduction op 'mulsum'");
  EXPECT_FALSE(comm_combination_valid(Collective::kAllReduce, DType::kI32, ReduceOp::kAvg));
  EXPECT_TRUE(comm_combination_valid(Collective::kAllGather, DType::kI32, ReduceOp::kAvg));
}

// Reduces the inputs of `n` ranks in the data type's own arithmetic, in rank
// order and in reverse, as an MPI implementation might; both must equal the
// exact expectation, which proves every partial result is representable.
void check_exact(DType t, ReduceOp op, int n) {
  const VerifiableData data(t, op, true, n, 1234);
  const size_t e = dtype_bytes(t);
  const int64_t count = 257;
  std::vector<uint8_t> want(count * e), buf(count * e), acc(count * e), acc_rev(count * e);
  data.fill_reduced(want.data(), 0, count);
  auto combine = [&](double a, double b) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return a + b;
      case ReduceOp::kProd: return a * b;
      case ReduceOp::kMin: return std::min(a, b);
      case ReduceOp::kMax: return std::max(a, b);
    }
    return 0.0;
  };
  for (int64_t i = 0; i < count; ++i) {
    double fwd = double(data.input(0, uint64_t(i))), rev = double(data.input(n - 1, uint64_t(i)));
    for (int r = 1; r < n; ++r) {
      fwd = combine(fwd, double(data.input(r, uint64_t(i))));
      rev = combine(rev, double(data.input(n - 1 - r, uint64_t(i))));
      // Each partial result must survive a round trip through the type.
      std::vector<uint8_t> cell(e);
      store_integer(cell.data(), 0, int64_t(fwd), t);
      ASSERT_EQ(load_as_double(cell.data(), 0, t), fwd) << dtype_name(t) << " " << reduce_op_name(op) << " n=" << n;
      store_integer(cell.data(), 0, int64_t(rev), t);
      ASSERT_EQ(load_as_double(cell.data(), 0, t), rev) << dtype_name(t) << " " << reduce_op_name(op) << " n=" << n;
    }
    if (op == ReduceOp::kAvg) {
      fwd /= n;
      rev /= n;
    }
    ASSERT_EQ(fwd, load_as_double(want.data(), i, t)) << dtype_name(t) << " " << reduce_op_name(op) << " n=" << n;
    ASSERT_EQ(rev, fwd);
  }
}

TEST(VerifiableData, EveryPartialReductionIsExact) {
  for (DType t : all_dtypes())
    for (ReduceOp op : all_reduce_ops()) {
      if (op == ReduceOp::kAvg && !is_floating(t)) continue;
      for (int n : {1, 2, 3, 4, 7, 16, 100, 300}) check_exact(t, op, n);
    }
}

TEST(VerifiableData, DataIsVariedAndSeeded) {
  const VerifiableData a(DType::kF32, ReduceOp::kSum, true, 4, 1), b(DType::kF32, ReduceOp::kSum, true, 4, 2);
  int distinct = 0, differ = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    distinct += a.input(1, i) != a.input(1, i + 1);
    differ += a.input(1, i) != b.input(1, i);
  }
  EXPECT_GT(distinct, 990);
  EXPECT_GT(differ, 990);
  // Rank matters too (a gather must not pass with one rank's data everywhere).
  int by_rank = 0;
  for (uint64_t i = 0; i < 1000; ++i) by_rank += a.input(0, i) != a.input(3, i);
  EXPECT_GT(by_rank, 990);
}

TEST(VerifiableData, MismatchesAreCountedPerElement) {
  for (DType t : all_dtypes()) {
    const VerifiableData d(t, ReduceOp::kSum, true, 3, 7);
    const size_t e = dtype_bytes(t);
    std::vector<uint8_t> want(100 * e), got(100 * e);
    d.fill_reduced(want.data(), 0, 100);
    d.fill_reduced(got.data(), 0, 100);
    EXPECT_EQ(count_mismatches(got.data(), want.data(), 100, t), 0) << dtype_name(t);
    store_integer(got.data(), 17, int64_t(load_as_double(got.data(), 17, t)) + 1, t);
    store_integer(got.data(), 99, int64_t(load_as_double(got.data(), 99, t)) - 1, t);
    EXPECT_EQ(count_mismatches(got.data(), want.data(), 100, t), 2) << dtype_name(t);
  }
}

TEST(CommSplit, ParsesNcclTestsForms) {
  SplitSpec mod = parse_split("MOD 2");
  EXPECT_EQ(split_color(mod, 0), 0);
  EXPECT_EQ(split_color(mod, 3), 1);
  SplitSpec div = parse_split("div4");
  EXPECT_EQ(split_color(div, 3), 0);
  EXPECT_EQ(split_color(div, 4), 1);
  SplitSpec mask = parse_split("AND 0x7");
  EXPECT_EQ(split_color(mask, 13), 5);
  EXPECT_EQ(split_color(parse_split("XOR 1"), 2), 3);
  EXPECT_EQ(split_color(parse_split("OR 1"), 2), 3);
  EXPECT_EQ(parse_split("").op, SplitSpec::Op::kNone);
  EXPECT_EQ(parse_split("NONE").op, SplitSpec::Op::kNone);
  expect_error([] { parse_split("MOD 0"); }, "MOD by zero");
  expect_error([] { parse_split("MUL 2"); }, "unknown operation 'MUL'");
  expect_error([] { parse_split("MOD x"); }, "'x' is not a non-negative number");
  expect_error([] { parse_split("MOD -2"); }, "not a non-negative number");
}

TEST(TrafficMatrix, ParsesAndScales) {
  TrafficMatrix m = parse_traffic_matrix("# comment\n1, 2\n\n3 4 # trailing\n", "m.txt");
  ASSERT_EQ(m.n, 2);
  EXPECT_EQ(m.at(1, 0), 3.0);
  // Mean per-rank send of 100 elements: 200 in all, split 1:2:3:4.
  std::vector<int64_t> c = scale_traffic(m, 100);
  EXPECT_EQ(c, (std::vector<int64_t>{20, 40, 60, 80}));
  TrafficLoad load = traffic_load(c, 2);
  EXPECT_EQ(load.max_rank_elems, 140);        // rank 1 sends 60 + 80
  EXPECT_EQ(load.max_rank_remote_elems, 60);  // rank 1 sends 60 to rank 0 (and rank 1 receives 40 from rank 0)
  EXPECT_DOUBLE_EQ(load.imbalance, 1.4);
  // Uniform: nccl-tests' all_to_all figures.
  TrafficLoad u = traffic_load(scale_traffic(uniform_traffic_matrix(4), 400), 4);
  EXPECT_EQ(u.max_rank_elems, 400);
  EXPECT_EQ(u.max_rank_remote_elems, 300);
  // Round trip through the text form.
  TrafficMatrix back = parse_traffic_matrix(format_traffic_matrix(m), "again");
  EXPECT_EQ(back.w, m.w);
  expect_error([] { parse_traffic_matrix("1 2\n3\n", "bad.txt"); }, "bad.txt: row 2 has 1 entries");
  expect_error([] { parse_traffic_matrix("1 -2\n3 4\n", "neg.txt"); }, "neg.txt:1: '-2' is not a non-negative");
  expect_error([] { parse_traffic_matrix("0 0\n0 0\n", "zero.txt"); }, "all zeros");
}

TEST(TrafficMatrix, DerivedFromRoutingLoads) {
  testing::TempDir dir;
  // Two MoE layers, four experts; expert-parallel size 2: rank 0 holds experts 0-1, rank 1 experts 2-3.
  const std::string path =
      dir.write("metrics.jsonl",
                "{\"step\":5,\"loss\":3.0}\n"
                "{\"step\":10,\"routing\":[{\"layer\":1,\"load\":[0.4,0.2,0.2,0.2],\"skip\":0.1},"
                "{\"layer\":3,\"load\":[0.1,0.1,0.1,0.7],\"skip\":0.0}]}\n"
                "{\"step\":20,\"routing\":[{\"layer\":1,\"load\":[0.25,0.25,0.25,0.25],\"skip\":0.0},"
                "{\"layer\":3,\"load\":[0.25,0.25,0.25,0.25],\"skip\":0.0}]}\n");
  TrafficMatrix last = traffic_matrix_from_routing(path, 2);
  EXPECT_EQ(last.w, (std::vector<double>{0.5, 0.5, 0.5, 0.5}));
  TrafficMatrix mean = traffic_matrix_from_routing(path, 2, {10, "mean"});
  EXPECT_NEAR(mean.at(0, 0), 0.4, 1e-12);  // (0.6 + 0.2) / 2
  EXPECT_NEAR(mean.at(1, 1), 0.6, 1e-12);  // (0.4 + 0.8) / 2
  TrafficMatrix layer1 = traffic_matrix_from_routing(path, 2, {10, "1"});
  EXPECT_NEAR(layer1.at(1, 0), 0.6, 1e-12);
  TrafficMatrix worst = traffic_matrix_from_routing(path, 2, {10, "max"});
  EXPECT_NEAR(worst.at(0, 1), 0.8, 1e-12);  // layer 3: rank 1 gets 0.8 of the tokens
  EXPECT_NE(worst.source.find("most imbalanced"), std::string::npos);
  TrafficMatrix per_expert = traffic_matrix_from_routing(path, 4, {10, "3"});
  EXPECT_NEAR(per_expert.at(2, 3), 0.7, 1e-12);
  expect_error([&] { traffic_matrix_from_routing(path, 3); },
               "4 experts cannot be split evenly over an expert-parallel size of 3");
  expect_error([&] { traffic_matrix_from_routing(path, 2, {11, "mean"}); }, "no line with routing loads for step 11");
  expect_error([&] { traffic_matrix_from_routing(path, 2, {10, "7"}); }, "no routing record for layer 7; layers: 1, 3");
  const std::string bad = dir.write("bad.jsonl", "{\"step\":1}\nnot json\n");
  expect_error([&] { traffic_matrix_from_routing(bad, 2); }, "bad.jsonl:2: invalid JSON");
}

TEST(CommBenchSummary, AveragesMeasuredSamplesAndCountsWrong) {
  CommRun run;
  CommRow a, b;
  a.out_of_place = {true, 1, 2, 4, 0, {}};
  a.in_place = {true, 1, 2, 2, 3, {}};
  b.out_of_place = {true, 1, 2, 6, -1, {}};
  run.rows = {a, b};
  CommBenchSummary s = summarize_comm_runs({run});
  EXPECT_EQ(s.samples, 3);
  EXPECT_DOUBLE_EQ(s.avg_busbw, 4.0);
  EXPECT_EQ(s.wrong_total, 3);
  EXPECT_TRUE(s.verified);
  nlohmann::json j = comm_bench_json(CommBenchOptions{}, CommBenchContext{}, {run});
  EXPECT_EQ(j["bench"], "comm");
  EXPECT_EQ(j["summary"]["wrong"], 3);
  EXPECT_EQ(j["summary"]["ok"], false);
  EXPECT_TRUE(j["runs"][0]["rows"][1]["in_place"].is_null());
  EXPECT_TRUE(j["runs"][0]["rows"][1]["out_of_place"]["wrong"].is_null());
}

}  // namespace
}  // namespace zaya
