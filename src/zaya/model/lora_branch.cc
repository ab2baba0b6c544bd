#include "zaya/model/lora_branch.h"

#include "zaya/core/error.h"

namespace zaya {
namespace {

// The branch of matrices m (gradients gm: backward) over rows whose kept h starts at h_Tr.
LoraBranch<float> bind(const ZayaConfig& c, const BlockLora& lora, LoraTarget t, const LoraMatrices& m,
                       const LoraMatrices* gm, float* h_Tr, int64_t tokens, int64_t out_stride) {
  LoraBranch<float> b;
  b.a_rI = m.a_rI;
  b.b_Or = m.b_Or;
  if (gm != nullptr) {
    b.da_rI = gm->a_rI;
    b.db_Or = gm->b_Or;
  }
  b.h_Tr = h_Tr;
  b.scratch = lora.scratch;
  b.shape = lora.shape(c, t, tokens, out_stride);
  b.row_offset = lora_slot(c, t).row_offset;
  return b;
}

const LoraMatrices* grads_of(const BlockLora& lora, LoraTarget t, LoraPass pass) {
  if (pass == LoraPass::kForward) return nullptr;
  ZAYA_ASSERT(lora.grads != nullptr);
  return &(*lora.grads)[size_t(t)];
}

}  // namespace

LoraBranch<float> lora_branch(const ZayaConfig& c, const BlockLora* lora, LoraTarget t, int64_t tokens,
                              int64_t out_stride, LoraPass pass) {
  ZAYA_ASSERT(!lora_is_expert(t));
  if (lora == nullptr || !lora->has(t)) return {};  // the base product alone: nothing to look up
  return bind(c, *lora, t, (*lora->weights)[size_t(t)], grads_of(*lora, t, pass), lora->h[size_t(t)], tokens,
              out_stride);
}

LoraBranch<float> lora_expert_branch(const ZayaConfig& c, const BlockLora* lora, LoraTarget t, int64_t expert,
                                     int64_t row0, int64_t rows, LoraPass pass) {
  ZAYA_ASSERT(lora_is_expert(t));
  if (lora == nullptr || !lora->has(t)) return {};
  const LoraMatrices* g = grads_of(*lora, t, pass);
  const LoraMatrices ge = g != nullptr ? g->expert(expert) : LoraMatrices{};
  return bind(c, *lora, t, (*lora->weights)[size_t(t)].expert(expert), g != nullptr ? &ge : nullptr,
              lora->h[size_t(t)] + row0 * lora->rank, rows, lora_slot(c, t).out);
}

}  // namespace zaya
