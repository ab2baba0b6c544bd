#include "zaya/plan/stream_ops.h"

namespace zaya {

double StreamWork::seconds(const HardwareProfile& p, double bytes_per_float) const {
  double t = floats * bytes_per_float / (p.stream_gbps.value * 1e9) + ops * p.op_overhead_us.value * 1e-6;
  if (p.exp_per_second.value > 0) t += exps / p.exp_per_second.value;
  return t;
}

namespace {

// Per token of one block: floats moved and exponentials of its forward pass,
// without the residual merge and RMSNorm before it (5D, counted apart).
struct BlockWork {
  double floats = 0, exps = 0;
};

BlockWork attention_work(const ZayaConfig& c, int64_t seq) {
  const double Q = double(c.q_width()), K = double(c.kv_width());
  const double C = double(c.conv_channels()), H = double(c.q_heads);
  const double keys = (double(seq) + 64) / 2;  // mean keys per query (64-query causal blocks)
  // Depthwise conv (read C, write C, scratch C); q/k mean terms (3(Q+K));
  // QK norm and RoPE (4(Q+K)); value streams (2K); softmax over the keys of
  // each head (3 passes, one exp each); output (Q).
  return {3 * C + 7 * (Q + K) + 2 * K + Q + 3 * H * keys, H * keys};
}

BlockWork moe_work(const ZayaConfig& c, double skip) {
  const double D = double(c.hidden), R = double(c.router_hidden), N = double(c.router_slots());
  const double F = double(c.expert_ffn), k = double(c.top_k) * (1 - skip);
  // Router: EDA (3R), norm (2R), two GELUs (4R), softmax and top-k over N
  // slots (4N); experts, per routed row: permute (2D), SwiGLU (3F, one
  // sigmoid per F), combine (2D).
  return {9 * R + 4 * N + k * (4 * D + 3 * F), 2 * R + N + k * F};
}

// Ops per half-layer pair: attention ~12 kernels, MoE ~10 plus 3 per local expert.
double attention_ops() { return 12; }
double moe_ops(const ZayaConfig& c, int64_t ep) { return 10 + 3 * double(c.experts) / double(ep); }

}  // namespace

StreamWork model_stream_work(const ZayaConfig& c, int64_t batch, int64_t seq, int64_t ep, double skip, bool backward) {
  const double T = double(batch * seq), D = double(c.hidden), V = double(c.vocab_size);
  StreamWork fwd;
  // Each half-layer: residual merge (3D) + RMSNorm (2D), then its block.
  const BlockWork a = attention_work(c, seq), m = moe_work(c, skip);
  const double blocks = double(c.num_blocks);
  fwd.floats = T * blocks * (10 * D + a.floats + m.floats);
  fwd.exps = T * blocks * (a.exps + m.exps);
  fwd.ops = blocks * (attention_ops() + moe_ops(c, ep));
  // Embedding gather (D), final norm (3D), cross-entropy over the logits
  // (max, exp-sum, loss: 3V, one exp per logit).
  fwd.floats += T * (4 * D + 3 * V);
  fwd.exps += T * V;
  fwd.ops += 4;
  if (!backward) return fwd;
  StreamWork all = fwd;
  // Backward: every forward pass is undone with about twice the traffic
  // (read the saved activation and the incoming gradient, write the outgoing
  // one); softmax probabilities are recomputed (exps again); the logits'
  // gradient is one more pass over T x V.
  all.floats += 2 * fwd.floats + T * 2 * V;
  all.exps += fwd.exps;
  all.ops += 2 * fwd.ops;
  return all;
}

StreamWork recompute_stream_work(const ZayaConfig& c, int64_t batch, int64_t seq, int64_t ep, double skip,
                                 Recompute r) {
  const double T = double(batch * seq), blocks = double(c.num_blocks);
  StreamWork w;
  if (recomputes_attention(r)) {
    const BlockWork a = attention_work(c, seq);
    w += {T * blocks * a.floats, T * blocks * a.exps, blocks * attention_ops()};
  }
  if (recomputes_moe(r)) {
    const BlockWork m = moe_work(c, skip);
    w += {T * blocks * m.floats, T * blocks * m.exps, blocks * moe_ops(c, ep)};
  }
  if (r == Recompute::kFull) w += {T * 2 * blocks * 2 * double(c.hidden), 0, 2 * blocks};  // the norms
  return w;
}

StreamWork adamw_stream_work(double n) {
  // Read g, m, v, w; write m, v, w; plus the gradient-norm pass and zeroing the
  // gradient.
  return {n * 9, 0, 3};
}

StreamWork muon_stream_work(double n, int ns_steps) {
  // Momentum (read g, m; write m, u), Frobenius norm and scale (3), update of
  // w (3), gradient norm and zeroing (2); per Newton-Schulz step: convert X
  // to bf16 (1.5) and X = aX + Y (3).
  return {n * (4 + 3 + 3 + 2 + 4.5 * ns_steps), 0, 4 + 3.0 * ns_steps};
}

}  // namespace zaya
