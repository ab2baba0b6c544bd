#include "zaya/plan/step_model.h"

#include <algorithm>
#include <map>

#include "zaya/core/error.h"
#include "zaya/dist/zero.h"
#include "zaya/model/model.h"
#include "zaya/model/params.h"
#include "zaya/plan/attention_window.h"
#include "zaya/plan/comm_model.h"
#include "zaya/plan/stream_ops.h"

namespace zaya {
namespace {

// The per-block attention GEMMs (scores, values and their gradients) and the
// grouped convolution's per-head GEMMs; not the q/k/v and output projections.
// GPU stacks fuse them (below).
bool is_fused_attention(const ModelGemm& g) {
  return g.name.rfind("attn.", 0) == 0 && g.name != "attn.qkv_proj" && g.name != "attn.o_proj";
}

// The grouped convolution's GEMMs (ops/cca_conv.h).
bool is_grouped_conv(const ModelGemm& g) { return g.name.rfind("attn.conv", 0) == 0; }

// The rounding of a bf16 GEMM's activation operand into bf16 scratch in
// zaya.cpp's CPU trainer (ops/bf16_linear.cc), per micro-batch: read 4 bytes
// and write 2 (1.5 floats of traffic) per element, one parallel region per
// call. The forward GEMM rounds its input x (M x K), the data-gradient GEMM
// the output gradient dy (M x K of dx = dy w), the weight-gradient GEMM x
// again (K x N of dw = dy^T x; dy is reused from the data-gradient GEMM).
// The LM head's dy is the exception: the cross-entropy writes it in bf16
// directly (ops/cross_entropy.h), so its data-gradient GEMM rounds nothing.
StreamWork bf16_rounding(const ModelGemm& g) {
  if (g.name == "lm_head" && g.phase == "bwd.dx") return {};
  const double elements =
      g.phase == "bwd.dw" ? double(g.shape.k) * double(g.shape.n) : double(g.shape.m) * double(g.shape.k);
  return {1.5 * elements * g.count, 0, g.count};
}

// The rounding the CPU trainer's bf16 attention core (ops/attention_bf16.h)
// does, charged to its GEMM rows: before the scores (forward, and again in
// backward) it rounds Q and the layer's K and V (kv_per_q = Hk / Hq of Q's
// width), before dP the output gradient dO; P and dS are written in bf16 by
// the softmax passes themselves (their traffic is the softmax's, in
// stream_ops.cc). `per_call`: the (sequence, head) GEMMs one batched call
// covers; each rounding is one parallel region per query block.
StreamWork attention_core_rounding(const ModelGemm& g, double kv_per_q, double per_call) {
  const double operand = double(g.shape.m) * double(g.shape.k) * g.count;  // Q or dO
  if (g.name.rfind("attn.scores", 0) == 0) return {1.5 * operand * (1 + 2 * kv_per_q), 0, 3 * g.count / per_call};
  if (g.name.rfind("attn.dprobs", 0) == 0) return {1.5 * operand, 0, g.count / per_call};
  return {};
}

// The rounding the CPU trainer's bf16 grouped convolution (ops/cca_conv_bf16.h)
// does, charged to its GEMM rows: one regrouping of conv A's output into bf16
// before the forward products and again before the weight gradients, one of
// the output gradient before the data gradients, for all k1 taps at once
// (`per_call`: the (sequence, group, tap) GEMMs one call covers).
StreamWork conv_rounding(const ModelGemm& g, double taps, double per_call) {
  const double operand =
      g.phase == "bwd.dw" ? double(g.shape.k) * double(g.shape.n) : double(g.shape.m) * double(g.shape.k);
  return {1.5 * operand * g.count / taps, 0, g.count / per_call};
}

// Flash attention reaches about this share of a dense GEMM's rate (an
// estimate, used only without measurements).
constexpr double kFusedAttentionShare = 0.6;

// Seconds of `count` calls of a GEMM per micro-batch. Measured shapes are
// taken as they are (zaya.cpp's own kernels). The analytic (GPU) model runs
// what GPU stacks run: the many small attention and grouped-conv GEMMs as
// one fused kernel per layer at kFusedAttentionShare of the GEMM rate, and
// the experts of a layer as one grouped GEMM (rows stacked over the local
// experts), each with one launch per layer.
double gemm_seconds(const GemmModel& model, const std::string& dtype, const ModelGemm& g, int64_t blocks,
                    int64_t local_experts, GemmEstimate& est) {
  est = model.estimate(dtype, g.shape);
  if (est.basis != "model") return g.count * est.seconds;
  const HardwareProfile& p = model.profile();
  const double launch = p.op_overhead_us.value * 1e-6;
  if (is_fused_attention(g)) {
    const double rate = p.peak_gflops(dtype) * 1e9 * p.gemm_efficiency.value * kFusedAttentionShare;
    est.efficiency = p.gemm_efficiency.value * kFusedAttentionShare;
    est.basis = "model (fused attention)";
    return g.count * g.shape.flops() / rate + double(blocks) * launch;
  }
  if (g.name.rfind("moe.expert", 0) == 0 && local_experts > 1) {
    GemmShape grouped = g.shape;
    (g.phase == "bwd.dw" ? grouped.k : grouped.m) *= local_experts;
    est = model.analytic(dtype, grouped);
    est.basis = "model (grouped GEMM)";
    return g.count / double(local_experts) * (est.seconds + launch);
  }
  return g.count * (est.seconds + launch);
}

// Newton-Schulz GEMMs of one rows x cols matrix (optim/optimizer.cc): per
// step in bf16 A = X X^T (or X^T X), B = b A + c A A, X = a X + B X (or X B);
// in float32 the same on the wide form W (X, or X^T when tall), with the two
// symmetric products A = W W^T and A A^T as two GEMMs each from 256 rows on
// (rows [0, m/2) in full, then the bottom-right block): W = a W + B W.
double newton_schulz_seconds(const GemmModel& model, const std::string& dtype, int64_t rows, int64_t cols, int steps) {
  const int64_t m = std::min(rows, cols), k = std::max(rows, cols);
  auto seconds = [&](const GemmShape& g) { return model.estimate(dtype, g).seconds; };
  if (dtype == "f32") {
    auto symmetric = [&](int64_t inner) {
      if (m < 256) return seconds(GemmShape{m, m, inner, false, true});
      const int64_t h = m / 2;
      return seconds(GemmShape{h, m, inner, false, true}) + seconds(GemmShape{m - h, m - h, inner, false, true});
    };
    return steps * (symmetric(k) + symmetric(m) + seconds(GemmShape{m, k, m, false, false}));
  }
  const bool wide = rows <= cols;
  GemmShape gram{m, m, k, !wide, wide};
  GemmShape square{m, m, m, false, false};
  GemmShape apply{rows, cols, m, false, false};
  return steps * (seconds(gram) + seconds(square) + seconds(apply));
}

}  // namespace

bool recomputes_gemm(Recompute r, const std::string& name) {
  if (name.rfind("attn.", 0) == 0) return recomputes_attention(r);
  if (name.rfind("moe.", 0) == 0) return recomputes_moe(r);
  return false;  // the LM head is never recomputed
}

void TrainLayout::validate(const ZayaConfig& c, const HardwareProfile& p) const {
  ZAYA_CHECK_USAGE(world >= 1, "--world = {} is invalid; allowed: >= 1", world);
  ZAYA_CHECK_USAGE(world <= p.max_devices,
                   "--world = {} is invalid for profile '{}'; allowed: 1..{} "
                   "(cluster.max_devices)",
                   world, p.name, p.max_devices);
  ZAYA_CHECK_USAGE(ep >= 1 && world % ep == 0, "--ep = {} is invalid; allowed: a divisor of --world ({})", ep, world);
  ZAYA_CHECK_USAGE(cp >= 1 && world % (ep * cp) == 0, "--cp = {} is invalid; allowed: world / ep ({}) a multiple of cp",
                   cp, world / ep);
  ZAYA_CHECK_USAGE(cp == 1 || (seq_len % (2 * cp) == 0 && seq_len >= 4 * cp),
                   "--seq-len = {} does not fit --cp = {}; allowed: a multiple of 2 "
                   "x cp = {} and at least {} (two chunks of at least 2 tokens per "
                   "rank)",
                   seq_len, cp, 2 * cp, 4 * cp);
  ZAYA_CHECK(c.experts % ep == 0, "--ep = {} is invalid; allowed: a divisor of the expert count ({})", ep, c.experts);
  ZAYA_CHECK_USAGE(micro_batch >= 1 && seq_len >= 1 && grad_accum >= 1,
                   "--micro-batch, --seq-len and --grad-accum must be >= 1 (got {}, {}, {})", micro_batch, seq_len,
                   grad_accum);
  ZAYA_CHECK_USAGE(dtype == "f32" || dtype == "bf16", "--dtype = '{}' is invalid; allowed: f32, bf16", dtype);
  ZAYA_CHECK_USAGE(ns_dtype == "f32" || ns_dtype == "bf16", "--ns-dtype = '{}' is invalid; allowed: f32, bf16",
                   ns_dtype);
  ZAYA_CHECK_USAGE(skip_fraction >= 0 && skip_fraction < 1, "--skip-fraction = {} is invalid; allowed: [0, 1)",
                   skip_fraction);
}

StepPrediction predict_step(const ZayaConfig& c, const TrainLayout& L, const GemmModel& model) {
  const HardwareProfile& p = model.profile();
  L.validate(c, p);
  StepPrediction r;
  const int64_t T = L.micro_batch * L.seq_len;
  // Forward and backward GEMMs of one micro-batch.
  ModelGemmOptions mo;
  mo.micro_batch = L.micro_batch;
  mo.seq_len = L.seq_len;
  mo.ep = L.ep;
  mo.skip_fraction = L.skip_fraction;
  // zaya.cpp's CPU trainer runs every GEMM in bf16 (the linear layers,
  // ops/bf16_linear.h; the attention core, ops/attention_bf16.h; the grouped
  // convolution, ops/cca_conv_bf16.h) but keeps its activations float32 (the
  // bandwidth-bound ops move 4 bytes per value in both precisions): each bf16
  // GEMM first rounds its activation operand into bf16 scratch
  // (bf16_rounding, attention_core_rounding and conv_rounding above).
  const bool cpu_bf16 = L.cpu_trainer && L.dtype == "bf16";
  StreamWork rounding, recompute_rounding;
  for (const ModelGemm& g : model_gemms(c, mo)) {
    GemmTime t;
    t.gemm = g;
    t.seconds = gemm_seconds(model, L.dtype, g, c.num_blocks, c.experts / L.ep, t.estimate) / double(L.cp);
    (g.phase == "fwd" ? r.gemm_fwd : r.gemm_bwd) += t.seconds;
    StreamWork round;
    const double taps = double(c.conv_kernel1), groups = double(c.conv_channels() / c.head_dim);
    if (cpu_bf16 && is_grouped_conv(g))
      round = conv_rounding(g, taps, double(L.micro_batch) * groups * taps);
    else if (cpu_bf16 && is_fused_attention(g))
      round = attention_core_rounding(g, double(c.kv_heads) / double(c.q_heads), double(L.micro_batch * c.q_heads));
    else if (cpu_bf16)
      round = bf16_rounding(g);
    rounding += round;
    if (g.phase == "fwd" && recomputes_gemm(L.recompute, g.name)) {
      r.recompute_gemm += t.seconds;
      r.recompute_flops += g.count * g.shape.flops() / double(L.cp);
      recompute_rounding += round;
    }
    r.gemms.push_back(std::move(t));
  }
  const double act_bytes = L.dtype == "bf16" && !L.cpu_trainer ? 2 : 4;
  r.stream = (model_stream_work(c, L.micro_batch, L.seq_len, L.ep, L.skip_fraction, true).seconds(p, act_bytes) +
              rounding.seconds(p)) /
             double(L.cp);
  r.recompute_stream =
      (recompute_stream_work(c, L.micro_batch, L.seq_len, L.ep, L.skip_fraction, L.recompute).seconds(p, act_bytes) +
       recompute_rounding.seconds(p)) /
      double(L.cp);
  if (L.cp > 1)
    r.notes.push_back(
        fmt::format("cp {}: each rank takes 1/{} of every GEMM, timed at the whole "
                    "sequence's shapes (the smaller shapes' efficiency is not modelled)",
                    L.cp, L.cp));
  const double micro = r.gemm_fwd + r.gemm_bwd + r.stream + r.recompute_gemm + r.recompute_stream;
  r.compute = double(L.grad_accum) * micro;

  // Optimizer: the busiest rank's ZeRO-1 shard (whole tensors per rank);
  // experts are sharded over the dp x cp ranks holding them.
  const int64_t dp = L.expert_replicas(), per_rank = c.experts / L.ep;
  std::map<std::pair<int64_t, int64_t>, double> ns_cache;
  for (int64_t ep_rank = 0; ep_rank < std::min<int64_t>(L.ep, 2); ++ep_rank) {  // ep ranks are alike up to expert ids
    const ParamTable table(c, true, ExpertRange{ep_rank * per_rank, per_rank});
    // dp ranks differ by shard; look at every one (a few thousand entries,
    // cheap). Rank g of the expert group is dp replica g / cp, cp rank g % cp
    // (dist/mesh.h: world rank = (dp_rank x ep + ep_rank) x cp + cp_rank).
    for (int64_t dp_rank = 0; dp_rank < dp; ++dp_rank) {
      const int64_t world_rank = (dp_rank / L.cp * L.ep + ep_rank) * L.cp + dp_rank % L.cp;
      std::vector<size_t> owned =
          L.world > 1 ? zero_owned_entries(zero_layout(table), int(world_rank), int(L.world), int(dp_rank), int(dp))
                      : std::vector<size_t>{};
      if (L.world == 1)
        for (size_t i = 0; i < table.entries().size(); ++i) owned.push_back(i);
      double gemm = 0, muon_floats = 0, adam_floats = 0, muon_mats = 0;
      for (size_t i : owned) {
        const ParamEntry& e = table.entries()[i];
        if (L.muon && e.muon) {
          const int64_t rows = e.shape[0], cols = e.numel / rows;
          auto it = ns_cache.find({rows, cols});
          if (it == ns_cache.end())
            it = ns_cache
                     .emplace(std::pair{rows, cols}, newton_schulz_seconds(model, L.ns_dtype, rows, cols, L.ns_steps))
                     .first;
          gemm += it->second;
          muon_floats += double(e.numel);
          muon_mats += 1;
        } else {
          adam_floats += double(e.numel);
        }
      }
      StreamWork w = adamw_stream_work(adam_floats);
      StreamWork m = muon_stream_work(muon_floats, L.ns_steps);
      m.ops *= muon_mats;
      w += m;
      const double stream = w.seconds(p);
      if (gemm + stream > r.optimizer_gemm + r.optimizer_stream) {
        r.optimizer_gemm = gemm;
        r.optimizer_stream = stream;
      }
    }
  }

  // zaya.cpp's CPU trainer refreshes the bf16 copy of every weight it holds
  // once per update: on one rank inside the update's own pass (write 2 bytes;
  // optim/optimizer.h, UpdateExtras), else as a pass of its own after the
  // parameter all-gather (read 4 bytes, write 2).
  if (cpu_bf16) {
    const ParamTable held(c, true, ExpertRange{0, per_rank});
    const StreamWork refresh = L.world == 1 ? StreamWork{0.5 * double(held.total_floats()), 0, 0}
                                            : StreamWork{1.5 * double(held.total_floats()), 0, 1};
    r.optimizer_stream += refresh.seconds(p);
  }

  // Communication.
  if (L.world > 1) {
    const ParamTable table(c, true, ExpertRange{0, per_rank});
    const double dense = double(table.dense_floats()), expert = double(table.total_floats()) - dense;
    const double buckets = double(c.half_layers() + 1);  // one per half-layer, plus the rest
    auto add = [&](const std::string& coll, int64_t n, double bytes, double pieces) {
      if (n <= 1 || bytes <= 0) return 0.0;
      const CommEstimate e = estimate_collective(p, coll, int(n), bytes / pieces);
      if (e.missing) r.notes.push_back(fmt::format("the profile has no {} curve: counted as free", coll));
      return pieces * e.seconds;
    };
    r.grad_reduce = add("reduce_scatter", L.world, dense * L.grad_bytes, buckets) +
                    add("reduce_scatter", dp, expert * L.grad_bytes, buckets);
    if (L.cp > 1) {
      // Whole-sequence K and V of every attention layer (f32, as gathered).
      const double kv = double(T) * double(c.kv_width()) * 4;
      r.context_parallel = double(L.grad_accum) * double(c.num_blocks) *
                           (4 * add("all_gather", L.cp, kv, 1) + 2 * add("reduce_scatter", L.cp, kv, 1));
    }
    r.param_gather =
        add("all_gather", L.world, dense * L.param_bytes, 1) + add("all_gather", dp, expert * L.param_bytes, 1);
    if (L.ep > 1) {
      const double rows = double(T) / double(L.cp) * double(c.top_k) * (1 - L.skip_fraction);
      r.expert_all_to_all = double(L.grad_accum) * 4 * double(c.num_blocks) *
                            add("all_to_all", L.ep, rows * double(c.hidden) * act_bytes, 1);
    }
    const bool overlap = L.overlap == 1 || (L.overlap < 0 && p.device_kind == "gpu");
    r.grad_reduce_exposed = overlap ? std::max(0.0, r.grad_reduce - r.gemm_bwd) : r.grad_reduce;
  }
  r.step = r.compute + r.expert_all_to_all + r.context_parallel + r.optimizer_gemm + r.optimizer_stream +
           r.grad_reduce_exposed + r.param_gather;

  const double routed = double(c.num_blocks) * double(T) * double(c.top_k) * (1 - L.skip_fraction);
  r.model_flops_per_rank =
      3 * windowed_forward_flops(c, L.micro_batch, L.seq_len, routed) * double(L.grad_accum) / double(L.cp);
  r.peak_gflops = p.peak_gflops(L.dtype);
  r.mfu = r.model_flops_per_rank / r.step / (r.peak_gflops * 1e9);
  r.tokens_per_second = double(L.tokens_per_step()) / r.step;
  return r;
}

}  // namespace zaya
