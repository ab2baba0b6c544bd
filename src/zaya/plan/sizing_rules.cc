#include "zaya/plan/sizing_rules.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/model/params.h"

namespace zaya {
namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Seconds per FLOP of every GEMM of one micro-batch (forward + backward).
// measured = false forces the analytic model (tile / wave quantization).
double gemm_seconds_per_flop(const ZayaConfig& c, const TrainLayout& L, const GemmModel& gemm, bool measured,
                             bool* all_exact) {
  ModelGemmOptions mo;
  mo.micro_batch = L.micro_batch;
  mo.seq_len = L.seq_len;
  mo.ep = L.ep;
  mo.skip_fraction = L.skip_fraction;
  double seconds = 0, flops = 0;
  if (all_exact != nullptr) *all_exact = true;
  for (const ModelGemm& g : model_gemms(c, mo)) {
    const GemmEstimate e = measured ? gemm.estimate(L.dtype, g.shape) : gemm.analytic(L.dtype, g.shape);
    if (all_exact != nullptr && e.basis != "measured") *all_exact = false;
    seconds += g.count * e.seconds;
    flops += g.count * g.shape.flops();
  }
  return seconds / flops;
}

// Slowdown of `c` against `padded`, measured when every shape of both was
// measured, else modelled.
void judge(const ZayaConfig& c, const ZayaConfig& padded, const TrainLayout& L, const GemmModel& gemm,
           SizingFinding& f) {
  bool exact_a = false, exact_b = false;
  const double a = gemm_seconds_per_flop(c, L, gemm, true, &exact_a);
  const double b = gemm_seconds_per_flop(padded, L, gemm, true, &exact_b);
  if (exact_a && exact_b) {
    f.slowdown = a / b - 1;
    f.basis = "measured";
    return;
  }
  f.slowdown =
      gemm_seconds_per_flop(c, L, gemm, false, nullptr) / gemm_seconds_per_flop(padded, L, gemm, false, nullptr) - 1;
  f.basis = "model";
}

}  // namespace

std::vector<SizingFinding> check_config(const ZayaConfig& c, const TrainLayout& L, const GemmModel& gemm) {
  std::vector<SizingFinding> out;
  const int64_t align = gemm.profile().align;
  auto dim = [&](const char* field, int64_t value, int64_t multiple, const std::string& rule, auto apply) {
    if (value % multiple == 0) return;
    SizingFinding f;
    f.field = field;
    f.value = value;
    f.suggested = round_up(value, multiple);
    f.rule = rule;
    ZayaConfig padded = c;
    apply(padded, f.suggested);
    judge(c, padded, L, gemm, f);
    out.push_back(f);
  };
  const std::string a = fmt::format("a multiple of {} (profile align: tile / vector width)", align);
  dim("kv_channels (head_dim)", c.head_dim, 64, "a multiple of 64 (128 preferred): attention tiles and QK/V GEMM K",
      [](ZayaConfig& z, int64_t v) { z.head_dim = v; });
  dim("hidden_size", c.hidden, align, a, [](ZayaConfig& z, int64_t v) { z.hidden = v; });
  dim("expert_ffn", c.expert_ffn, align, a, [](ZayaConfig& z, int64_t v) { z.expert_ffn = v; });
  dim("zaya_mlp_expansion (router width)", c.router_hidden, std::min<int64_t>(align, 64), a,
      [](ZayaConfig& z, int64_t v) { z.router_hidden = v; });
  dim("vocab_size", c.vocab_size, std::max<int64_t>(align, 64), "a multiple of 64 (logit GEMM; Megatron pads to 128)",
      [](ZayaConfig& z, int64_t v) { z.vocab_size = v; });
  // Tokens per expert GEMM below one tile: the expert GEMMs run in the slow
  // regime.
  ModelGemmOptions mo;
  mo.micro_batch = L.micro_batch;
  mo.seq_len = L.seq_len;
  mo.ep = L.ep;
  mo.skip_fraction = L.skip_fraction;
  const int64_t rows = expected_expert_tokens(c, mo), tile = gemm.profile().tile_m;
  if (rows < tile) {
    SizingFinding f;
    f.field = "micro_batch (rows per expert GEMM)";
    f.value = rows;
    f.suggested = tile;
    f.rule = fmt::format("at least one tile ({} rows) per expert GEMM: T x top_k / experts x ep", tile);
    const GemmShape small{rows, 2 * c.expert_ffn, c.hidden, false, true},
        full{tile, 2 * c.expert_ffn, c.hidden, false, true};
    const GemmEstimate es = gemm.estimate(L.dtype, small), ef = gemm.estimate(L.dtype, full);
    f.slowdown = (es.seconds / small.flops()) / (ef.seconds / full.flops()) - 1;
    f.basis = es.basis == "measured" && ef.basis == "measured" ? "measured" : es.basis;
    out.push_back(f);
  }
  return out;
}

std::vector<SizeProposal> propose_configs(const SizeTarget& target, const TrainLayout& L, const GemmModel& gemm,
                                          int count) {
  ZAYA_CHECK_USAGE((target.total_params > 0) + (target.active_params > 0) + (target.compute_flops > 0) == 1,
                   "give exactly one target: --total, --active or --compute");
  double active_target = target.active_params;
  if (target.compute_flops > 0) active_target = std::sqrt(target.compute_flops / 120.0);  // C = 6 N (20 N)
  const HardwareProfile& p = gemm.profile();
  const int64_t align = p.align;
  std::vector<SizeProposal> all;
  for (int64_t D : {512, 768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192}) {
    ZayaConfig c;  // ZAYA1-base ratios
    c.head_dim = D >= 1024 ? 128 : 64;
    c.hidden = D;
    c.q_heads = std::max<int64_t>(1, D / 2 / c.head_dim);
    c.kv_heads = std::max<int64_t>(1, c.q_heads / 4);
    c.expert_ffn = D;
    c.router_hidden = std::max<int64_t>(64, std::min<int64_t>(256, round_up(D / 8, 64)));
    c.vocab_size = round_up(c.real_vocab_size, std::max<int64_t>(128, align));
    if (c.experts % L.ep != 0) continue;
    c.num_blocks = 1;
    const ParamCounts one = count_parameters(c);
    c.num_blocks = 2;
    const ParamCounts two = count_parameters(c);
    const double per_block_total = double(two.total - one.total), per_block_active = double(two.active - one.active);
    const double fixed_total = double(one.total) - per_block_total,
                 fixed_active = double(one.active) - per_block_active;
    const double blocks = target.total_params > 0 ? (target.total_params - fixed_total) / per_block_total
                                                  : (active_target - fixed_active) / per_block_active;
    if (blocks < 2) continue;
    c.num_blocks = std::max<int64_t>(2, std::llround(blocks));
    const double aspect = double(D) / double(c.num_blocks);
    if (aspect < 24 || aspect > 160 || c.num_blocks > 1024) continue;
    c.validate("proposal");
    SizeProposal s;
    s.config = c;
    const ParamCounts n = count_parameters(c);
    s.total_params = n.total;
    s.active_params = n.active;
    s.step = predict_step(c, L, gemm);
    ModelGemmOptions mo;
    mo.micro_batch = L.micro_batch;
    mo.seq_len = L.seq_len;
    mo.ep = L.ep;
    const GemmShape proj{L.micro_batch * L.seq_len, D, D, false, true};
    const GemmEstimate ep = gemm.estimate(L.dtype, proj);
    s.reasons.push_back(
        fmt::format("hidden {}: a multiple of 256 (and of "
                    "align {}); a {}x{}x{} projection runs at "
                    "{:.0f}% of the {} peak ({})",
                    D, align, proj.m, proj.n, proj.k, 100 * ep.efficiency, L.dtype, ep.basis));
    s.reasons.push_back(
        fmt::format("head_dim {} (a multiple of 64); q latent "
                    "{} = {} heads (hidden / 2, as ZAYA1), "
                    "kv latent {} = {} heads (CCGQA 4:1)",
                    c.head_dim, c.q_width(), c.q_heads, c.kv_width(), c.kv_heads));
    const int64_t rows = expected_expert_tokens(c, mo);
    const GemmShape fc1{rows, 2 * c.expert_ffn, D, false, true};
    const GemmEstimate ee = gemm.estimate(L.dtype, fc1);
    s.reasons.push_back(
        fmt::format("{} experts of width {} (= hidden, ZAYA1's expansion), top-{}: {} rows "
                    "per expert "
                    "GEMM at this layout, fc1 {}x{}x{} at {:.0f}% of peak ({}){}",
                    c.experts, c.expert_ffn, c.top_k, rows, fc1.m, fc1.n, fc1.k, 100 * ee.efficiency, ee.basis,
                    rows < p.tile_m ? " - below one tile: raise the micro-batch" : ""));
    s.reasons.push_back(
        fmt::format("router width {} (a multiple of 64); vocab "
                    "{} padded to a multiple of {}",
                    c.router_hidden, c.vocab_size, std::max<int64_t>(128, align)));
    s.reasons.push_back(
        fmt::format("{} blocks from the target ({:.2f}B total, "
                    "{:.2f}B active); hidden / depth = {:.0f} "
                    "(ZAYA1-base: 51)",
                    c.num_blocks, double(n.total) / 1e9, double(n.active) / 1e9, aspect));
    s.reasons.push_back(
        fmt::format("predicted on {} at this layout: {:.3f} s/step, {:.0f} tokens/s, MFU "
                    "{:.1f}%",
                    p.name, s.step.step, s.step.tokens_per_second, 100 * s.step.mfu));
    all.push_back(std::move(s));
  }
  ZAYA_CHECK(!all.empty(),
             "no ZAYA1-style config fits the target (hidden "
             "512..8192, 2..1024 blocks, hidden/depth "
             "24..160); try a larger or smaller target");
  // Best MFU first (the same target size: MFU ranks throughput per useful
  // FLOP).
  std::sort(all.begin(), all.end(),
            [](const SizeProposal& x, const SizeProposal& y) { return x.step.mfu > y.step.mfu; });
  if (int(all.size()) > count) all.resize(size_t(count));
  return all;
}

}  // namespace zaya
