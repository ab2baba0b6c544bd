#pragma once
// The MoE width trade-off (docs/systems-notes.md §2: ZAYA1 justifies its
// expert widths by training throughput and inference latency together):
// configurations with the same total expert parameters per layer
// (experts x expert_ffn held fixed), over expert counts and top-k, each with
// its predicted training tokens/s and decode latency on the profile.

#include <cstdint>
#include <vector>

#include "zaya/model/config.h"
#include "zaya/plan/latency_model.h"
#include "zaya/plan/step_model.h"

namespace zaya {

struct MoeTradeoffRow {
  ZayaConfig config;
  int64_t active_params = 0, total_params = 0;
  double train_tokens_per_second = 0, train_mfu = 0;
  double decode_seconds = 0;
  double experts_touched = 0;
  bool is_base = false;  // the config asked about
};

// Expert counts E' = E x 2^j (j = -2 .. 2, 1 <= E' <= 63, E x F divisible by
// E' with F' a multiple of the profile's align) and top-k in {1, 2, 4} (k <=
// E').
std::vector<MoeTradeoffRow> moe_tradeoff(const ZayaConfig& base, const TrainLayout& train, const InferenceLayout& infer,
                                         const GemmModel& gemm);

}  // namespace zaya
