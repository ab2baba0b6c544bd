#include "zaya/plan/moe_tradeoff.h"

#include "zaya/model/params.h"

namespace zaya {

std::vector<MoeTradeoffRow> moe_tradeoff(const ZayaConfig& base, const TrainLayout& train, const InferenceLayout& infer,
                                         const GemmModel& gemm) {
  std::vector<MoeTradeoffRow> rows;
  const int64_t width = base.experts * base.expert_ffn;  // total expert width per layer (fixed)
  const int64_t align = gemm.profile().align;
  for (int j = -2; j <= 2; ++j) {
    const int64_t E = j < 0 ? base.experts >> -j : base.experts << j;
    if (E < 1 || E > 63 || (j < 0 && (base.experts % (int64_t(1) << -j)) != 0)) continue;
    if (width % E != 0) continue;
    const int64_t F = width / E;
    if (F % align != 0 && F != base.expert_ffn) continue;
    if (train.ep > 1 && E % train.ep != 0) continue;
    for (int64_t k : {1, 2, 4}) {
      if (k > E) continue;
      MoeTradeoffRow row;
      row.config = base;
      row.config.experts = E;
      row.config.expert_ffn = F;
      row.config.top_k = k;
      row.is_base = E == base.experts && k == base.top_k;
      const ParamCounts counts = count_parameters(row.config);
      row.active_params = counts.active;
      row.total_params = counts.total;
      const StepPrediction s = predict_step(row.config, train, gemm);
      row.train_tokens_per_second = s.tokens_per_second;
      row.train_mfu = s.mfu;
      const LatencyPrediction l = predict_latency(row.config, infer, gemm);
      row.decode_seconds = l.decode_seconds;
      row.experts_touched = l.experts_touched;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace zaya
