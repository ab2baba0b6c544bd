#include "zaya/rl/expert_gather.h"

#include <cstring>
#include <vector>

#include "zaya/core/error.h"

namespace zaya {

std::unique_ptr<ZayaModel> full_model_like(const ZayaModel& local) {
  ZAYA_CHECK(local.expert_type() == WeightType::kF32,
             "internal error: gathering experts held as packed {} rows (refused by the config)",
             weight_type_name(local.expert_type()));
  return std::make_unique<ZayaModel>(local.config(), ExpertRange{}, local.storage());
}

void gather_experts(const ZayaModel& local, Comm& ep, ZayaModel& full) {
  const ZayaConfig& c = local.config();
  const ExpertRange mine = local.params().experts();
  ZAYA_CHECK(c.experts % ep.size() == 0 && mine.count == c.experts / ep.size() &&
                 mine.first == ep.rank() * mine.count && full.params().experts().count == c.experts,
             "internal error: experts {}+{} of {} on ep rank {} of {}", mine.first, mine.count, c.experts, ep.rank(),
             ep.size());
  // The dense tensors (every rank holds them alike) and the buffers.
  std::vector<float> values;
  for (const ParamEntry& e : local.params().entries()) {
    if (e.expert >= 0) continue;
    values.resize(size_t(e.numel));
    local.read_param(e, values.data());
    full.set_param(full.params().at(e.name), values.data());
  }
  std::memcpy(full.buffer_data(), local.buffer_data(), sizeof(float) * size_t(local.buffers().total_floats()));
  // This rank's experts, in table order, then every rank's (each lays its experts out as its own table does).
  const int64_t n = local.params().total_floats() - local.params().dense_floats();
  std::vector<float> send(static_cast<size_t>(n)), all(static_cast<size_t>(n * ep.size()));
  int64_t at = 0;
  for (const ParamEntry& e : local.params().entries())
    if (e.expert >= 0) {
      local.read_param(e, send.data() + at);
      at += e.numel;
    }
  ZAYA_CHECK(at == n, "internal error: {} expert floats of {}", at, n);
  ep.all_gather(send.data(), all.data(), size_t(n), DType::kF32);
  for (int r = 0; r < ep.size(); ++r) {
    const ParamTable theirs(c, true, ExpertRange{int64_t(r) * mine.count, mine.count});
    const float* from = all.data() + int64_t(r) * n;
    for (const ParamEntry& e : theirs.entries())
      if (e.expert >= 0) {
        full.set_param(full.params().at(e.name), from);
        from += e.numel;
      }
  }
  if (full.bf16_weights() != nullptr && full.storage() == ParamStorage::kF32) full.refresh_bf16_weights();
}

}  // namespace zaya
