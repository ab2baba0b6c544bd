#include "zaya/plan/memory_model.h"

#include <algorithm>

#include "zaya/model/params.h"

namespace zaya {

double activation_floats_per_token(const ZayaConfig& c, double skip, Recompute recompute, bool bf16_inputs) {
  const double D = double(c.hidden), Q = double(c.q_width()), K = double(c.kv_width());
  const double P = Q + 2 * K, C = double(c.conv_channels()), R = double(c.router_hidden);
  const double N = double(c.router_slots()), F = double(c.expert_ffn), J = double(c.top_k), k = J * (1 - skip);
  const double H = double(c.q_heads), Hk = double(c.kv_heads), blocks = double(c.num_blocks);
  const double half_layers = 2 * blocks;
  // The residual stream: each half-layer's input and the final merge. Per
  // half-layer its normed input, RMS statistic and output (and the embedding
  // output), one set of them under full recomputation.
  const double stream = (half_layers + 1) * D + (recompute == Recompute::kFull ? 1 : half_layers + 1) * (2 * D + 1);
  // Kept in bf16: the attention blocks' normed inputs (half each, one float32
  // buffer shared) and the experts' routed rows and SwiGLU output (below).
  const bool bf16_attention_inputs = bf16_inputs && !recomputes_attention(recompute);
  const bool bf16_expert_inputs = bf16_inputs && !recomputes_moe(recompute);
  const double attention_inputs = bf16_attention_inputs ? D - blocks * D / 2 : 0;
  // AttentionActs: fused projection P, convA output C per row,
  // q/k before and after norm and RoPE, v (3Q + 3K), the output Q, per-head statistics (2H + Hk).
  const double attn = P + C + 3 * Q + 3 * K + 2 * H + Hk;
  // MoeActs: router states (6R + 1), logits and probabilities (2N), gates (J);
  // per routed row: input D, fc1 output 2F, activation F (the input and the
  // activation as bf16: half each); outputs in plan order (J D).
  const double gemm_inputs = bf16_expert_inputs ? (D + F) / 2 : D + F;
  const double moe = 6 * R + 1 + 2 * N + J + k * (gemm_inputs + 2 * F) + J * D;
  const double attn_sets = recomputes_attention(recompute) ? 1 : blocks;
  const double moe_sets = recomputes_moe(recompute) ? 1 : blocks;
  // Recomputed MoE blocks under EDA keep each layer's router state for the next.
  const double eda = recomputes_moe(recompute) && c.use_eda ? blocks * R : 0;
  // Backward scratch, shared by all layers: attention (conv output and its
  // gradient, convA's gradient, q/k/v/o gradients, the fused projection's),
  // MoE (plan-order send buffer, outputs' and inputs' gradients; received
  // rows and expert outputs, SwiGLU gradients per routed row; the router's
  // gradients and the EDA carry), and the residual / block gradients (4D).
  // With bf16 expert inputs, their float32 values for the forward (k (D + F)).
  const double scratch = (3 * C + 3 * Q + 3 * K + P) + (3 * J * D + J + k * (2 * D + 3 * F) + 2 * N + 7 * R) + 4 * D +
                         (bf16_expert_inputs ? k * (D + F) : 0);
  // The loss and log-sum-exp rows.
  return stream + attention_inputs + attn_sets * attn + moe_sets * moe + eda + scratch + 2;
}

MemoryPrediction predict_memory(const ZayaConfig& c, const TrainLayout& L) {
  MemoryPrediction m;
  const int64_t per_rank = c.experts / L.ep;
  const ParamTable table(c, true, ExpertRange{0, per_rank});
  const double dense = double(table.dense_floats()), expert = double(table.total_floats()) - dense;
  m.params_held = dense + expert;
  const bool mixed = L.dtype == "bf16";
  m.weights = L.cpu_trainer ? m.params_held * (mixed ? 6 : 4) : m.params_held * (mixed ? 2 : 4);
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
  const bool sharded_master = mixed && !L.cpu_trainer;
  m.optimizer = share * (muon * 4 + adam * 8 + (sharded_master ? m.params_held * 4 : 0)) + biggest * 4;
  // This rank's tokens: 1/cp of each sequence under context parallelism, plus
  // one layer's whole-sequence K/V, their gradients and the gather staging
  // (model/attention_block.h: 6 buffers of B x S x kv_width floats).
  const double T = double(L.micro_batch * L.seq_len) / double(L.cp);
  const double act_bytes = L.cpu_trainer || !mixed ? 4 : 2;
  // zaya.cpp's trainer keeps the inputs only GEMMs read in bf16 under bf16 GEMMs (model/model.h).
  m.activations = T * activation_floats_per_token(c, L.skip_fraction, L.recompute, L.cpu_trainer && mixed) * act_bytes;
  if (L.cp > 1) m.activations += 6 * double(L.micro_batch * L.seq_len) * double(c.kv_width()) * 4;
  // f32 logits (zaya_high_prec), with a GPU stack also their gradient; one chunk of rows of them with a loss chunk.
  const double logit_rows = L.loss_chunk > 0 ? std::min(T, double(L.loss_chunk)) : T;
  m.logits = logit_rows * double(c.vocab_size) * 4 * (L.cpu_trainer ? 1 : 2);
  return m;
}

}  // namespace zaya
