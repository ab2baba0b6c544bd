#pragma once
// The LoRA settings and adapters the LoRA tests share (model/lora_test.cc, formats/lora_peft_test.cc).

#include <vector>

#include "zaya/core/rng.h"
#include "zaya/model/lora.h"

namespace zaya::testing {

inline const std::vector<LoraTarget> kAttention = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kVCurrent,
                                                   LoraTarget::kVDelayed, LoraTarget::kO};
inline const std::vector<LoraTarget> kRouter = {LoraTarget::kRouterDown, LoraTarget::kRouterFc1, LoraTarget::kRouterFc2,
                                                LoraTarget::kRouterOut};
inline const std::vector<LoraTarget> kExperts = {LoraTarget::kExpertGateUp, LoraTarget::kExpertDown};

inline LoraConfig lora_config(double dropout = 0, std::vector<LoraTarget> targets = kAttention) {
  LoraConfig l;
  l.enabled = true;
  l.rank = 4;
  l.alpha = 8;
  l.dropout = dropout;
  l.targets = std::move(targets);
  return l;
}

// Adapters with both matrices nonzero (a trained adapter): init() draws one
// (A, or B for an expert target), the other gets N(0, 0.2^2).
inline void randomize(LoraAdapters& a, uint64_t seed) {
  a.init(seed);
  const int64_t r = a.config().rank;
  for (const auto& e : a.entries()) {
    const bool expert = lora_is_expert(e.target);
    float* p = a.data() + (expert ? e.a_offset : e.b_offset);
    const int64_t n = expert ? e.a_floats(r) : e.b_floats(r);
    for (int64_t i = 0; i < n; ++i) p[i] = 0.2f * normal01(seed, 7 + uint64_t(e.b_offset), uint64_t(i));
  }
}

}  // namespace zaya::testing
