// zaya plan: predicted training step time, memory, MFU and inference latency
// of a config on a hardware profile and layout, and the MoE width trade-off
// (src/zaya/plan/plan_job.h, docs/plan.md).
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/cli/plan_flags.h"
#include "zaya/io/atomic_file.h"
#include "zaya/plan/plan_job.h"

namespace zaya::cli {
namespace {

// The job's options (plan/plan_job.h) and what only the printing and the JSON need.
struct PlanCliOptions : PlanJobOptions {
  int top_gemms = 8;
  std::string json_out;
};

double gib(double bytes) { return bytes / double(1 << 30); }

void run_plan(const PlanCliOptions& o) {
  const PlanJobResult res = run_plan_job(o);
  const ZayaConfig& c = res.setup.config;
  const TrainLayout& L = res.setup.layout;
  const HardwareProfile& p = res.setup.profile;
  const ParamCounts& counts = res.counts;
  fmt::print("zaya plan: {} ({:.2f}B params, {:.2f}B active) on {} ({})\n", o.common.model, counts.total / 1e9,
             counts.active / 1e9, p.name, p.description);
  fmt::print(
      "  layout: {} device(s) = dp {} x ep {}{}, micro-batch {} x seq {} "
      "x accum {} = {} tokens/step "
      "({} sequences), {} GEMMs, recompute {}, Muon {}\n",
      L.world, L.dp(), L.ep, L.cp > 1 ? fmt::format(" x cp {}", L.cp) : "", L.micro_batch, L.seq_len, L.grad_accum,
      L.tokens_per_step(), L.tokens_per_step() / L.seq_len, L.dtype, recompute_name(L.recompute),
      L.muon ? fmt::format("on ({} NS steps, {})", L.ns_steps, L.ns_dtype) : "off");
  const StepPrediction& r = res.step;
  fmt::print("\n# training step (per device)\n");
  fmt::print("  GEMMs forward        {:10.4f} s per micro-batch\n", r.gemm_fwd);
  fmt::print("  GEMMs backward       {:10.4f} s per micro-batch\n", r.gemm_bwd);
  fmt::print("  bandwidth-bound ops  {:10.4f} s per micro-batch\n", r.stream);
  if (L.recompute != Recompute::kNone)
    fmt::print("  recomputation        {:10.4f} s per micro-batch (GEMMs {:.4f} s, {:.1f} GFLOP; other ops {:.4f} s)\n",
               r.recompute_gemm + r.recompute_stream, r.recompute_gemm, r.recompute_flops / 1e9, r.recompute_stream);
  fmt::print("  compute              {:10.4f} s ({} micro-batches)\n", r.compute, L.grad_accum);
  fmt::print(
      "  optimizer            {:10.4f} s (Newton-Schulz GEMMs {:.4f} s, "
      "element-wise {:.4f} s; busiest "
      "ZeRO-1 shard)\n",
      r.optimizer_gemm + r.optimizer_stream, r.optimizer_gemm, r.optimizer_stream);
  if (L.world > 1)
    fmt::print(
        "  communication        reduce-scatter {:.4f} s (exposed {:.4f} "
        "s), all-gather {:.4f} s, expert "
        "all-to-all {:.4f} s{}\n",
        r.grad_reduce, r.grad_reduce_exposed, r.param_gather, r.expert_all_to_all,
        L.cp > 1 ? fmt::format(", context-parallel K/V {:.4f} s", r.context_parallel) : "");
  fmt::print(
      "  step                 {:10.4f} s   {:.0f} tokens/s (all "
      "devices)   MFU {:.1f}% of {:.0f} GFLOP/s "
      "{} ({})\n",
      r.step, r.tokens_per_second, 100 * r.mfu, r.peak_gflops, L.dtype,
      L.dtype == "f32" ? p.peak_f32_gflops.source : p.peak_bf16_gflops.source);
  for (const std::string& n : r.notes) fmt::print("  note: {}\n", n);
  const std::vector<GemmTime>& top = res.gemms_by_time;
  if (o.top_gemms > 0) {
    fmt::print(
        "\n# largest GEMMs of a micro-batch\n  {:<22} {:<7} {:>20} "
        "{:>8} {:>10} {:>6}  basis\n",
        "gemm", "phase", "MxNxK", "calls", "seconds", "%peak");
    for (int i = 0; i < std::min<int>(o.top_gemms, int(top.size())); ++i) {
      const GemmTime& g = top[size_t(i)];
      fmt::print("  {:<22} {:<7} {:>20} {:>8.0f} {:>10.4f} {:>5.0f}%  {}\n", g.gemm.name, g.gemm.phase,
                 fmt::format("{}x{}x{}", g.gemm.shape.m, g.gemm.shape.n, g.gemm.shape.k), g.gemm.count, g.seconds,
                 100 * g.estimate.efficiency, g.estimate.basis);
    }
  }
  const MemoryPrediction& m = res.memory;
  fmt::print(
      "\n# memory per device\n  weights {:.2f} GiB, gradients {:.2f} "
      "GiB, optimizer {:.2f} GiB (ZeRO-1 shard), "
      "activations {:.2f} GiB, logits {:.2f} GiB: total {:.2f} GiB of "
      "{:.1f} GiB{}\n",
      gib(m.weights), gib(m.gradients), gib(m.optimizer), gib(m.activations), gib(m.logits), gib(m.total()),
      p.memory_gib.value, gib(m.total()) > p.memory_gib.value ? "  DOES NOT FIT" : "");
  const InferenceLayout& il = res.inference;
  const LatencyPrediction& lat = res.latency;
  fmt::print("\n# inference on one device ({}, batch {}, context {})\n", il.dtype, il.batch, il.context);
  fmt::print("  prefill  {:.4f} s ({:.0f} tokens/s)\n", lat.prefill_seconds, lat.prefill_tokens_per_second);
  fmt::print(
      "  decode   {:.5f} s per step ({:.0f} tokens/s), {}: {:.2f} GB "
      "weights ({:.1f} of {} experts per layer) "
      "+ {:.3f} GB KV cache (CCA; {:.3f} GB uncompressed, {:.1f}x)\n",
      lat.decode_seconds, lat.decode_tokens_per_second, lat.decode_memory_bound ? "bandwidth-bound" : "compute-bound",
      lat.weight_bytes / 1e9, lat.experts_touched, c.experts, lat.kv_bytes / 1e9, lat.kv_bytes_uncompressed / 1e9,
      lat.kv_bytes_uncompressed / std::max(1.0, lat.kv_bytes));
  if (o.tradeoff) {
    fmt::print(
        "\n# MoE width trade-off at equal total expert parameters ({} x "
        "{} per layer)\n",
        c.experts, c.expert_ffn);
    fmt::print("  {:>7} {:>7} {:>5} {:>10} {:>10} {:>12} {:>7} {:>12} {:>9}\n", "experts", "width", "top-k", "active B",
               "total B", "train tok/s", "MFU", "decode ms", "touched");
    for (const MoeTradeoffRow& t : res.tradeoff)
      fmt::print(
          "  {:>7} {:>7} {:>5} {:>10.3f} {:>10.3f} {:>12.0f} {:>6.1f}% "
          "{:>12.3f} {:>9.1f}{}\n",
          t.config.experts, t.config.expert_ffn, t.config.top_k, t.active_params / 1e9, t.total_params / 1e9,
          t.train_tokens_per_second, 100 * t.train_mfu, 1e3 * t.decode_seconds, t.experts_touched,
          t.is_base ? "  <- this config" : "");
  }
  if (!o.json_out.empty()) write_file_atomic(o.json_out, plan_json(res, o.common.model).dump(2) + "\n");
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanCliOptions>();
  auto* cmd = app.add_subcommand("plan",
                                 "predict step time, memory, MFU and inference "
                                 "latency on a hardware profile");
  add_plan_common_options(*cmd, o->common);
  cmd->add_option("--batch", o->batch, "inference: sequences decoded together")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--context", o->context, "inference: context length")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--infer-dtype", o->infer_dtype, "inference weights and KV cache: f32 or bf16 (default: --dtype)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_flag("!--no-tradeoff", o->tradeoff, "skip the MoE width trade-off table");
  cmd->add_option("--top-gemms", o->top_gemms, "GEMMs listed (0: none)")->check(CLI::Range(0, 1000));
  cmd->add_option("--json", o->json_out, "write the prediction as JSON");
  cmd->callback([o] { run_plan(*o); });
}

}  // namespace zaya::cli
