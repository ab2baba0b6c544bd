#include "zaya/plan/profile_measure.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "zaya/bench/gemm_run.h"
#include "zaya/bench/machine_info.h"
#include "zaya/bench/membw_bench.h"
#include "zaya/core/exp_f32.h"
#include "zaya/core/timer.h"
#include "zaya/model/params.h"
#include "zaya/plan/attention_window.h"
#include "zaya/plan/comm_model.h"

namespace zaya {
namespace {

using ShapeKey = std::tuple<int64_t, int64_t, int64_t, bool, bool>;

void add_shape(std::vector<GemmShape>& v, std::set<ShapeKey>& seen, const GemmShape& s) {
  if (seen.insert({s.m, s.n, s.k, s.trans_a, s.trans_b}).second) v.push_back(s);
}

double exp_rate(bool quick) {
  const int64_t n = quick ? 1 << 16 : 1 << 22;
  std::vector<float> x(static_cast<size_t>(n), 0.5f), y(static_cast<size_t>(n), 0.0f);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_seconds();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[size_t(i)] = exp_f32(x[size_t(i)] - y[size_t(i)] * 1e-30f);
    best = std::min(best, now_seconds() - t0);
  }
  return double(n) / best;
}

double parallel_region_us() {
  std::vector<float> a(1024, 1.0f);
  const int reps = 2000;
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const double t0 = now_seconds();
    for (int r = 0; r < reps; ++r) {
#pragma omp parallel for schedule(static)
      for (int i = 0; i < 1024; ++i) a[size_t(i)] = a[size_t(i)] * 0.999f + 0.001f;
    }
    best = std::min(best, (now_seconds() - t0) / reps);
  }
  return best * 1e6;
}

// One collective's busbw over sizes, timed on every rank; the slowest rank
// counts.
CommCurve measure_curve(Comm& world, const std::string& coll, uint64_t max_bytes, int iters) {
  const int n = world.size();
  CommCurve c;
  c.collective = coll;
  c.ranks = n;
  c.scope = "intra";
  c.source = "measured";
  std::vector<float> send(max_bytes / 4 + 16, 1.0f), recv(max_bytes / 4 + 16, 0.0f);
  for (uint64_t size = 4096; size <= max_bytes; size *= 4) {
    const size_t elems = size / 4, per_rank = elems / size_t(n);
    auto issue = [&] {
      if (coll == "all_reduce")
        world.all_reduce(send.data(), recv.data(), elems, DType::kF32, ReduceOp::kSum);
      else if (coll == "reduce_scatter")
        world.reduce_scatter(send.data(), recv.data(), per_rank, DType::kF32, ReduceOp::kSum);
      else if (coll == "all_gather")
        world.all_gather(send.data(), recv.data(), per_rank, DType::kF32);
      else
        world.all_to_all(send.data(), recv.data(), per_rank, DType::kF32);
    };
    issue();
    world.barrier();
    const double t0 = now_seconds();
    for (int i = 0; i < iters; ++i) issue();
    double t = (now_seconds() - t0) / iters, slowest = 0;
    world.all_reduce(&t, &slowest, 1, DType::kF64, ReduceOp::kMax);
    const double bytes = coll == "all_reduce" ? double(elems) * 4 : double(per_rank) * 4 * n;
    c.points.push_back({bytes, bytes / slowest / 1e9 * comm_busbw_factor(coll, n)});
  }
  return c;
}

}  // namespace

HardwareProfile measure_profile(const ProfileMeasureOptions& o, Comm& world,
                                const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& s) {
    if (log && world.rank() == 0) log(s);
  };
  const MachineInfo mi = machine_info();
  HardwareProfile p;
  p.name = o.name;
  p.device_kind = "cpu";
  p.description = fmt::format(
      "{} ({} logical CPUs), {} rank(s) x {} thread(s), measured "
      "by zaya profile measure",
      mi.cpu, mi.logical_cpus, world.size(), omp_get_max_threads());
  p.ranks_measured = world.size();
  p.threads_per_rank = omp_get_max_threads();
  p.compute_units = omp_get_max_threads();
  p.tile_m = 16;  // AVX-512 micro-kernel rows x columns (16 floats per vector);
                  // an estimate
  p.tile_n = 64;
  p.align = 16;
  p.devices_per_node = world.size();
  p.max_devices = world.size();
  p.memory_gib = {mi.memory_gib / world.size(), "measured", "host memory / ranks on this node"};

  // Memory bandwidth: STREAM triad beyond the caches, all ranks at once.
  say("measuring memory bandwidth (STREAM triad)...");
  MembwOptions mb;
  mb.kernels = {"triad"};
  mb.threads = {omp_get_max_threads()};
  mb.min_bytes = mb.max_bytes = o.quick ? uint64_t(8) << 20 : o.membw_bytes;
  mb.reps = 3;
  world.barrier();
  const std::vector<MembwPoint> pts = run_membw(mb);
  const double triad = pts.empty() ? 1 : pts.front().best_gbps;
  p.membw_gbps = {triad, "measured", "STREAM triad, best of 3, all ranks at once"};
  p.stream_gbps = {triad, "measured", "STREAM triad (what element-wise ops reach)"};
  say(fmt::format("  triad {:.1f} GB/s per rank", triad));
  p.exp_per_second = {exp_rate(o.quick), "measured",
                      "exp_f32 (core/exp_f32.h, the trainer's exp) over a float array, all threads"};
  p.op_overhead_us = {parallel_region_us(), "measured", "one OpenMP parallel region over 1024 floats"};
  say(fmt::format("  {:.2f} G exp/s, {:.1f} us per parallel region", p.exp_per_second.value / 1e9,
                  p.op_overhead_us.value));

  // GEMMs: a generic grid plus the models' own shapes.
  std::vector<GemmShape> f32, bf16;
  std::set<ShapeKey> seen32, seen16;
  const std::vector<int64_t> grid = o.quick ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{64, 256, 1024, 2048};
  for (int64_t m : grid)
    for (int64_t n : grid)
      for (int64_t k : grid) {
        add_shape(f32, seen32, GemmShape{m, n, k, false, true});
        add_shape(bf16, seen16, GemmShape{m, n, k, false, false});
      }
  for (const std::string& spec : o.models) {
    const ZayaConfig c = load_model_config(spec);
    for (int64_t b : o.micro_batches)
      for (int64_t sl : o.seq_lens) {
        ModelGemmOptions mo;
        mo.micro_batch = b;
        mo.seq_len = sl;
        mo.ep = o.ep;
        for (const ModelGemm& g : model_gemms(c, mo)) add_shape(f32, seen32, g.shape);
      }
    const ParamTable table(c, true);
    for (const ParamEntry& e : table.entries()) {
      if (!e.muon) continue;
      const int64_t rows = e.shape[0], cols = e.numel / rows, m = std::min(rows, cols);
      const bool wide = rows <= cols;
      add_shape(bf16, seen16, GemmShape{m, m, wide ? cols : rows, !wide, wide});
      add_shape(bf16, seen16, GemmShape{m, m, m, false, false});
      add_shape(bf16, seen16, GemmShape{rows, cols, m, false, false});
    }
  }
  GemmRunOptions go;
  go.timing.min_seconds = o.quick ? 0.002 : o.gemm_min_seconds;
  go.timing.min_calls = o.quick ? 2 : 5;
  go.membw_gbps = triad;
  go.falloff = 0.85;
  if (o.quick) go.peak_side_f32 = go.peak_side_bf16 = 256;
  say(fmt::format("measuring {} f32 and {} bf16 GEMM shapes...", f32.size(), bf16.size()));
  world.barrier();
  go.dtypes = {GemmDType::kF32};
  GemmEfficiencyTable table = run_gemm_shapes(f32, go);
  go.dtypes = {GemmDType::kBF16};
  const GemmEfficiencyTable t16 = run_gemm_shapes(bf16, go);
  table.entries.insert(table.entries.end(), t16.entries.begin(), t16.entries.end());
  table.peak_gflops["bf16"] = t16.peak_gflops.at("bf16");
  p.peak_f32_gflops = {table.peak_gflops.at("f32"), "measured", "best f32 GEMM (oneDNN sgemm)"};
  p.peak_bf16_gflops = {table.peak_gflops.at("bf16"), "measured", "best bf16 GEMM (oneDNN matmul)"};
  double best_big = 0;
  for (const GemmTableEntry& e : table.entries)
    if (e.dtype == GemmDType::kF32 && e.shape.m >= 1024 && e.shape.n >= 1024 && e.shape.k >= 1024)
      best_big = std::max(best_big, e.efficiency);
  p.gemm_efficiency = {best_big > 0 ? best_big : 0.8, best_big > 0 ? "measured" : "estimate",
                       "share of the f32 peak of the largest grid GEMMs"};
  p.gemm_table = table;
  say(fmt::format("  peak f32 {:.0f} GFLOP/s, bf16 {:.0f} GFLOP/s", p.peak_f32_gflops.value, p.peak_bf16_gflops.value));

  if (world.size() > 1) {
    say(fmt::format("measuring collectives on {} ranks...", world.size()));
    for (const char* c : {"all_reduce", "reduce_scatter", "all_gather", "all_to_all"})
      p.comm.push_back(measure_curve(world, c, o.quick ? uint64_t(64) << 10 : o.comm_max_bytes, o.quick ? 2 : 10));
  }
  p.validate("the measured profile");
  return p;
}

}  // namespace zaya
