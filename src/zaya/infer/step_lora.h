#pragma once
// The LoRA adapters of one decoder step (docs/serve.md "Adapters"): each
// chunk names its adapter (StepChunk::lora, else the model's own,
// InferModel::lora(), else none), so sequences with different adapters run in
// one batch. The base product runs once over every row of the step; then, for
// each adapter, its low-rank branch runs over the rows of the sequences that
// use it (ops/lora_rows.h), unmerged. Each row's branch has the same bits in
// any batch: a sequence decodes as it would alone with its adapter.
//
// plan() groups the step's rows by adapter; add() and add_expert() add the
// branches of one target (an expert target over the expert-major rows of one
// expert, mapped back to their tokens by the expert plan's row_token).

#include <cstdint>
#include <span>
#include <vector>

#include "zaya/model/lora.h"

namespace zaya {

struct StepChunk;

class StepLora {
 public:
  // Row t of the step belongs to chunk row_chunk[t]; that chunk's adapter is
  // its own `lora`, or `fallback` when null (the engine checked they fit the model).
  void plan(std::span<const StepChunk> chunks, const LoraAdapters* fallback, std::span<const int32_t> row_chunk);
  // Whether some row of the step has an adapter.
  bool any() const { return used_ > 0; }

  // y[t] (row stride ldy) += scale * x[t] A^T B^T (x row stride ldx) for every
  // row t with an adapter that targets t in block `block`: y's columns from the
  // target's row_offset (its part of the fused q/k/v projection).
  void add(int64_t block, LoraTarget target, float* y, int64_t ldy, const float* x, int64_t ldx) const;
  // The same for expert `expert` of an expert target over the expert-major
  // rows [row0, row0 + rows), row r holding token row_token[r].
  void add_expert(int64_t block, LoraTarget target, int64_t expert, int64_t row0, int64_t rows,
                  const int32_t* row_token, float* y, int64_t ldy, const float* x, int64_t ldx);

 private:
  struct Group {
    const LoraAdapters* adapters = nullptr;
    std::vector<int32_t> rows;  // the step's rows with this adapter, ascending
  };
  std::vector<Group> groups_;  // [0, used_) in use; kept for their capacity
  size_t used_ = 0;
  std::vector<int32_t> row_group_;  // per row of the step: its group, -1 none
  std::vector<int32_t> picked_;     // add_expert's rows of one group, reused
};

}  // namespace zaya
