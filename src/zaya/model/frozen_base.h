#pragma once
// A frozen base kept in bf16 (LoRA with bf16 GEMMs, docs/training.md "LoRA"),
// and the routed experts of a quantized base (QLoRA) kept only as packed rows:
// the large matrices exist only as bf16 (no float32 copy), the small tensors
// stay float32 beside their bf16 copy.
//
// bf16-only: the fused q/k/v rows, o_proj, the experts' fc1 and fc2 and the
// embedding (the tied LM head) or an untied LM head. Everything else (norms,
// convolution taps and biases, key temperatures, residual scales, the router's
// matrices and biases) stays float32: a few MB per layer.
//
// The model's ModelWeights keep float32 views of every tensor, so the blocks
// and ops need no second code path: the GEMMs of a bf16-only matrix find its
// bf16 copy by address (ops/bf16_linear.h Bf16Weights::copy_of) and never read
// the float32 view. Those views point into address space that FrozenF32Space
// reserves without memory: only the pages of the float32 tensors are backed
// (readable, writable); a bf16-only tensor's pages are inaccessible, so a read
// of its float32 view faults instead of returning zeros (its first and last
// page may be shared with a float32 neighbour and stay accessible).

#include <cstdint>

#include "zaya/model/params.h"

namespace zaya {

// True for the tensors a frozen bf16 base holds only as bf16.
bool bf16_only_role(TensorRole role);
// True for the tensors a quantized base (QLoRA, docs/training.md "LoRA over a
// quantized base") holds only as packed rows (ops/quant_linear.h): the routed
// experts' fc1 and fc2.
bool quantized_base_role(TensorRole role);

// Address space for the float32 arena of `table`, backed only where the
// tensors that are held in float32 live (zeros there until written): every
// tensor but the bf16-only ones (bf16_only) and the quantized experts
// (quantized_experts).
class FrozenF32Space {
 public:
  FrozenF32Space(const ParamTable& table, bool bf16_only, bool quantized_experts);
  ~FrozenF32Space();
  FrozenF32Space(const FrozenF32Space&) = delete;
  FrozenF32Space& operator=(const FrozenF32Space&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  // Bytes of the accessible (float32-held) pages.
  int64_t backed_bytes() const { return backed_bytes_; }

 private:
  float* data_ = nullptr;
  int64_t bytes_ = 0;
  int64_t backed_bytes_ = 0;
};

}  // namespace zaya
