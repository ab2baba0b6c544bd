#include "zaya/plan/latency_model.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/model/conv_taps.h"
#include "zaya/model/params.h"
#include "zaya/plan/attention_window.h"
#include "zaya/plan/stream_ops.h"

namespace zaya {

LatencyPrediction predict_latency(const ZayaConfig& c, const InferenceLayout& L, const GemmModel& model) {
  ZAYA_CHECK_USAGE(L.batch >= 1 && L.context >= 1, "--batch and --context must be >= 1 (got {}, {})", L.batch,
                   L.context);
  ZAYA_CHECK_USAGE(L.dtype == "f32" || L.dtype == "bf16", "--infer-dtype = '{}' is invalid; allowed: f32, bf16",
                   L.dtype);
  const HardwareProfile& p = model.profile();
  const double bytes = L.dtype == "bf16" ? 2 : 4;
  LatencyPrediction r;
  // Prefill: the forward GEMMs and ops of batch x context tokens.
  ModelGemmOptions mo;
  mo.micro_batch = L.batch;
  mo.seq_len = L.context;
  mo.skip_fraction = L.skip_fraction;
  for (const ModelGemm& g : model_gemms(c, mo))
    if (g.phase == "fwd") r.prefill_seconds += g.count * model.estimate(L.dtype, g.shape).seconds;
  r.prefill_seconds += model_stream_work(c, L.batch, L.context, 1, L.skip_fraction, false).seconds(p, bytes);
  r.prefill_tokens_per_second = double(L.batch * L.context) / r.prefill_seconds;

  // Decode: bytes read per step.
  const ParamCounts counts = count_parameters(c);
  const double E = double(c.experts), k = double(c.top_k) * (1 - L.skip_fraction);
  const double per_expert = 3.0 * double(c.hidden) * double(c.expert_ffn);  // fc1 (2F x D) + fc2 (D x F)
  const double experts_total = per_expert * E * double(c.num_blocks);
  const double dense = double(counts.total) - experts_total;  // includes the tied embedding / LM head
  r.experts_touched = E * (1 - std::pow(1 - std::min(1.0, k / E), double(L.batch)));
  r.weight_bytes = (dense + r.experts_touched * per_expert * double(c.num_blocks)) * bytes;
  const double layers = double(c.num_blocks);
  // Tokens held over all layers: the context on full blocks, the ring of W - 1 on sliding ones.
  const double kv_tokens = kv_cache_tokens(c, L.context);
  // Per sequence: the conv state of (cca_time0 - 1) + (cca_time1 - 1) raw q|k rows (two for ZAYA1), and the value
  // shift's.
  const double conv_state =
      (double(conv_history(c)) * double(c.conv_channels()) + 2.0 * double(c.hidden)) * layers * bytes;
  r.kv_bytes = double(L.batch) * (kv_tokens * 2.0 * double(c.kv_width()) * bytes + conv_state);
  r.kv_bytes_uncompressed = double(L.batch) * kv_tokens * 2.0 * double(c.hidden) * bytes;
  const double read = r.weight_bytes + r.kv_bytes;
  // FLOPs: 2 x active parameters per token plus attention over the keys each layer sees.
  const double flops =
      double(L.batch) * (2.0 * double(counts.active) + 4.0 * double(c.q_width()) * decode_attended_keys(c, L.context));
  const double t_mem = read / (p.stream_gbps.value * 1e9);
  const double t_flops = flops / (p.peak_gflops(L.dtype) * 1e9 * p.gemm_efficiency.value);
  r.decode_memory_bound = t_mem >= t_flops;
  // Launches: ~12 attention and ~10 + 2 per touched expert MoE kernels per
  // layer, and the head.
  const double ops = layers * (22 + 2 * r.experts_touched) + 4;
  r.decode_seconds = std::max(t_mem, t_flops) + ops * p.op_overhead_us.value * 1e-6;
  r.decode_tokens_per_second = double(L.batch) / r.decode_seconds;
  return r;
}

}  // namespace zaya
