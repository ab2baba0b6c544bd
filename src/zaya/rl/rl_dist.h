#pragma once
// `zaya rl` on several ranks (docs/rl.md "Several ranks"): every rank (a
// data rank: dp x ep of them, cp is 1) takes the step's same P prompts from the
// prompt order and samples its contiguous share of them, P / ranks prompts with
// all G samples each, from the sampling seeds the one-rank run gives those
// samples, whatever parallel.ep is (expert parallelism changes where the
// experts live, rl/expert_gather.h and rl/trainer_sampler.h, not which rank
// samples what); a group never spans two ranks, so advantages need no
// communication. The gradients are reduced as in
// `zaya train` (StepNumerics, ZeRO-1), the loss a token-level mean over the
// completion tokens of the whole global batch. The step's statistics are
// reduced here.

#include <cstdint>
#include <vector>

#include "zaya/dist/comm.h"

namespace zaya {

struct RankShare {
  int64_t begin = 0, end = 0;  // the prompts [begin, end) of the step's list
};

// Rank `rank` of `ranks`' share of `prompts` (which the ranks divide evenly: checked by the config).
RankShare rank_share(int64_t prompts, int rank, int ranks);

// In place over the world: v[i] = sum (or min, max) over the ranks; nothing on one rank.
void reduce_over_ranks(Comm& world, std::vector<double>& v, ReduceOp op);

}  // namespace zaya
