#include "zaya/infer/step_lora.h"

#include "zaya/infer/engine.h"
#include "zaya/ops/lora_rows.h"

namespace zaya {

void StepLora::plan(std::span<const StepChunk> chunks, const LoraAdapters* fallback,
                    std::span<const int32_t> row_chunk) {
  for (size_t g = 0; g < used_; ++g) groups_[g].rows.clear();
  used_ = 0;
  row_group_.assign(row_chunk.size(), -1);
  std::vector<int32_t> chunk_group(chunks.size(), -1);
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const LoraAdapters* a = chunks[ci].lora != nullptr ? chunks[ci].lora : fallback;
    if (a == nullptr) continue;
    size_t g = 0;
    while (g < used_ && groups_[g].adapters != a) ++g;
    if (g == used_) {
      if (used_ == groups_.size()) groups_.emplace_back();
      groups_[used_++].adapters = a;
    }
    chunk_group[ci] = int32_t(g);
  }
  if (used_ == 0) return;
  for (size_t t = 0; t < row_chunk.size(); ++t) {
    const int32_t g = chunk_group[size_t(row_chunk[t])];
    row_group_[t] = g;
    if (g >= 0) groups_[size_t(g)].rows.push_back(int32_t(t));
  }
}

namespace {

LoraRowsShape rows_shape(const LoraAdapters& a, const LoraSlot& slot, int64_t ldy, int64_t ldx) {
  return {.in = slot.in,
          .out = slot.out,
          .rank = a.config().rank,
          .ldx = ldx,
          .ldy = ldy,
          .scale = float(a.config().scale())};
}

}  // namespace

void StepLora::add(int64_t block, LoraTarget target, float* y, int64_t ldy, const float* x, int64_t ldx) const {
  for (size_t g = 0; g < used_; ++g) {
    const LoraAdapters& a = *groups_[g].adapters;
    const LoraMatrices& m = a.views()[size_t(block)][size_t(target)];
    if (m.a_rI == nullptr) continue;  // not a target of this adapter
    const LoraSlot slot = lora_slot(a.model_config(), target);
    lora_rows_forward(y + slot.row_offset, x, groups_[g].rows, m.a_rI, m.b_Or, rows_shape(a, slot, ldy, ldx));
  }
}

void StepLora::add_expert(int64_t block, LoraTarget target, int64_t expert, int64_t row0, int64_t rows,
                          const int32_t* row_token, float* y, int64_t ldy, const float* x, int64_t ldx) {
  for (size_t g = 0; g < used_; ++g) {
    const LoraAdapters& a = *groups_[g].adapters;
    const LoraMatrices& m = a.views()[size_t(block)][size_t(target)];
    if (m.a_rI == nullptr) continue;
    picked_.clear();
    for (int64_t r = row0; r < row0 + rows; ++r)
      if (row_group_[size_t(row_token[r])] == int32_t(g)) picked_.push_back(int32_t(r));
    const LoraMatrices me = m.expert(expert);
    lora_rows_forward(y, x, picked_, me.a_rI, me.b_Or, rows_shape(a, lora_slot(a.model_config(), target), ldy, ldx));
  }
}

}  // namespace zaya
