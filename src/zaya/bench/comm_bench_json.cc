// The results of `zaya bench comm` as one summary and as JSON (comm_bench.h).
#include <algorithm>
#include <cmath>

#include "zaya/bench/comm_bench.h"

namespace zaya {

CommBenchSummary summarize_comm_runs(const std::vector<CommRun>& runs) {
  CommBenchSummary s;
  double sum = 0;
  for (const CommRun& run : runs)
    for (const CommRow& row : run.rows)
      for (const CommSample* x : {&row.out_of_place, &row.in_place}) {
        if (!x->ran) continue;
        sum += x->busbw;
        ++s.samples;
        if (x->wrong >= 0) {
          s.verified = true;
          s.wrong_total += x->wrong;
        }
      }
  s.avg_busbw = s.samples ? sum / double(s.samples) : 0;
  return s;
}

namespace {

nlohmann::json sample_json(const CommSample& s) {
  if (!s.ran) return nullptr;
  nlohmann::json j = {{"time_us", s.time_us},
                      {"algbw_gbps", s.algbw},
                      {"busbw_gbps", s.busbw},
                      {"iter_us",
                       {{"n", s.iter_us.n},
                        {"min", s.iter_us.min},
                        {"max", s.iter_us.max},
                        {"mean", s.iter_us.mean},
                        {"p50", s.iter_us.p50},
                        {"p99", s.iter_us.p99},
                        {"cv", s.iter_us.cv}}}};
  j["wrong"] = s.wrong >= 0 ? nlohmann::json(s.wrong) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

nlohmann::json comm_bench_json(const CommBenchOptions& o, const CommBenchContext& ctx,
                               const std::vector<CommRun>& runs) {
  const CommBenchSummary s = summarize_comm_runs(runs);
  nlohmann::json config = {{"world_ranks", ctx.world_ranks},
                           {"group_ranks", ctx.group_ranks},
                           {"groups", ctx.groups},
                           {"split", ctx.split},
                           {"minbytes", o.min_bytes},
                           {"maxbytes", o.max_bytes},
                           {"stepbytes", o.step_bytes},
                           {"stepfactor", o.step_factor},
                           {"iters", o.iters},
                           {"warmup_iters", o.warmup},
                           {"agg_iters", o.agg_iters},
                           {"check", o.check},
                           {"average", o.average},
                           {"time_stat", o.time_stat},
                           {"root", o.root},
                           {"timeout_s", o.timeout},
                           {"calls", o.raw ? "mpi" : "comm"},
                           {"fault", comm_fault_name(o.fault)},
                           {"ranks", ctx.rank_lines}};
  nlohmann::json jruns = nlohmann::json::array();
  for (const CommRun& run : runs) {
    nlohmann::json rows = nlohmann::json::array();
    for (const CommRow& row : run.rows)
      rows.push_back({{"size", row.size_bytes},
                      {"count", row.count},
                      {"out_of_place", sample_json(row.out_of_place)},
                      {"in_place", sample_json(row.in_place)}});
    nlohmann::json jr = {{"collective", collective_name(run.coll)},
                         {"dtype", dtype_name(run.dtype)},
                         {"op", run.has_op ? reduce_op_name(run.op) : "none"},
                         {"root", run.root},
                         {"ranks", run.group_ranks},
                         {"busbw_factor", busbw_factor(run.coll, run.group_ranks)},
                         {"rows", rows}};
    if (run.coll == Collective::kAllToAllV) {
      jr["matrix"] = run.matrix_source;
      jr["imbalance"] = run.imbalance;
    }
    jruns.push_back(std::move(jr));
  }
  const bool gate_ok = ctx.min_bw <= 0 || s.avg_busbw >= 0.9 * ctx.min_bw;
  return {{"bench", "comm"},
          {"format_version", 1},
          {"config", config},
          {"runs", jruns},
          {"summary",
           {{"avg_busbw_gbps", s.avg_busbw},
            {"samples", s.samples},
            {"wrong", s.wrong_total},
            {"verified", s.verified},
            {"min_bw_gbps", ctx.min_bw},
            {"min_bw_ok", gate_ok},
            {"ok", s.wrong_total == 0 && gate_ok}}}};
}

}  // namespace zaya
