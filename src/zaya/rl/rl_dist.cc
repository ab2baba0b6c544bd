#include "zaya/rl/rl_dist.h"

#include "zaya/core/error.h"

namespace zaya {

RankShare rank_share(int64_t prompts, int rank, int ranks) {
  ZAYA_CHECK(ranks >= 1 && prompts % ranks == 0, "internal error: {} prompts over {} ranks", prompts, ranks);
  const int64_t each = prompts / ranks;
  return {int64_t(rank) * each, int64_t(rank + 1) * each};
}

void reduce_over_ranks(Comm& world, std::vector<double>& v, ReduceOp op) {
  if (world.size() > 1 && !v.empty()) world.all_reduce(v.data(), v.data(), v.size(), DType::kF64, op);
}

}  // namespace zaya
