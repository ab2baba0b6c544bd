#include "zaya/plan/memory_model.h"

#include <algorithm>

#include "zaya/model/params.h"

namespace zaya {

double activation_floats_per_token(const ZayaConfig& c, double skip) {
  const double D = double(c.hidden), Q = double(c.q_width()), K = double(c.kv_width());
  const double P = Q + 2 * K, C = double(c.conv_channels()), R = double(c.router_hidden);
  const double N = double(c.router_slots()), F = double(c.expert_ffn), k = double(c.top_k) * (1 - skip);
  // Attention (AttentionActs): residual, normed input, output (3D), fused
  // projection P, conv output C, q/k before and after the norm (2(Q+K)), v (K),
  // attention output Q, per-head statistics (small).
  const double attn = 3 * D + P + C + 2 * (Q + K) + K + Q + 4 * double(c.q_heads);
  // MoE (MoeActs): residual, normed input, output (3D), router states (6R),
  // logits and probabilities (2N), per routed row: input D, fc1 output 2F,
  // activation F, output D.
  const double moe = 3 * D + 6 * R + 2 * N + k * (2 * D + 3 * F);
  return attn + moe;
}

MemoryPrediction predict_memory(const ZayaConfig& c, const TrainLayout& L) {
  MemoryPrediction m;
  const int64_t per_rank = c.experts / L.ep;
  const ParamTable table(c, true, ExpertRange{0, per_rank});
  const double dense = double(table.dense_floats()), expert = double(table.total_floats()) - dense;
  m.params_held = dense + expert;
  const bool mixed = L.dtype == "bf16";
  m.weights = m.params_held * (mixed ? 2 : 4);
  m.gradients = m.params_held * 4;
  // Optimizer state, sharded: dense over the world, experts over dp. Muon
  // matrices keep one float (momentum), the rest two (AdamW); mixed precision
  // adds the f32 master copy of the shard.
  double muon = 0, adam = 0, biggest = 0;
  for (const ParamEntry& e : table.entries()) {
    if (L.muon && e.muon) {
      muon += double(e.numel);
      const double rows = double(e.shape[0]), cols = double(e.numel) / rows, mn = std::min(rows, cols);
      biggest = std::max(biggest, 3 * rows * cols + 2 * mn * mn);
    } else {
      adam += double(e.numel);
    }
  }
  const double share = (dense / double(L.world) + expert / double(L.expert_replicas())) / std::max(1.0, m.params_held);
  m.optimizer = share * (muon * 4 + adam * 8 + (mixed ? m.params_held * 4 : 0)) + biggest * 4;
  // This rank's tokens: 1/cp of each sequence under context parallelism, plus
  // one layer's whole-sequence K/V, their gradients and the gather staging
  // (model/attention_block.h: 6 buffers of B x S x kv_width floats).
  const double T = double(L.micro_batch * L.seq_len) / double(L.cp);
  const double act_bytes = mixed ? 2 : 4;
  m.activations = T * double(c.num_blocks) * activation_floats_per_token(c, L.skip_fraction) * act_bytes;
  if (L.cp > 1) m.activations += 6 * double(L.micro_batch * L.seq_len) * double(c.kv_width()) * 4;
  // f32 logits and their gradient (zaya_high_prec), plus loss / log-sum-exp
  // rows.
  m.logits = T * double(c.vocab_size) * 4 * 2;
  return m;
}

}  // namespace zaya
