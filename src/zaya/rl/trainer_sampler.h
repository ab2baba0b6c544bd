#pragma once
// Sampling with the trainer's own forward (`rl.sample_with_trainer`,
// docs/rl.md "Parity"): the samples of an RL step grow in the step's
// training rows (RolloutBatches' layout: sample j in row j of micro-batch
// j / micro), and each new token of every sample is drawn (sample_token, the
// decoder's rule and seeded stream) from the logits of a forward of its
// micro-batch in the trainer's workspace, the rows holding every sample's
// tokens so far and padding after them; the token's log-probability is that
// row's cross-entropy (ops/cross_entropy.h), the function the trainer's loss
// uses. A position's forward reads only the positions before it, and each of
// the trainer's kernels computes a row alone at a fixed shape and thread
// count, so the rows' final forward (the old policy, rl_job.cc) gives every
// sampled token the same bits: the rollout's log-probabilities are the
// trainer's (tested, rl/trainer_sampler_test.cc). It costs one forward of
// the step's rows per generated token (no KV cache).
//
// Under expert parallelism the trainer's forward is collective over the ep
// group (model/moe_experts.h), so its ranks must run the same forwards in the
// same order although their samples end at different tokens: each round, the
// micro-batches with a sample still growing on any rank of the group
// (MicroBatchAgreement, an OR over the group) are run by every rank of it, a
// rank whose own rows are done running them too and ignoring the logits; the
// sampling stops on all of them together, when no rank has a sample growing.
// A row's logits do not depend on the other rows of the forward (above), so
// the extra forwards change no sample.

#include <cstdint>
#include <functional>
#include <vector>

#include "zaya/rl/rollout.h"

namespace zaya {

// The logits [micro x seq, vocab] of the trainer's forward of micro-batch `micro` (ids_BS: micro x seq ids).
using RowsForward = std::function<const float*(int64_t micro, const int32_t* ids_BS)>;

struct TrainerRows {
  int64_t micro = 0, seq = 0, accum = 0;  // the step's micro-batches
  int64_t vocab = 0, real_vocab = 0;      // logit columns, and the ids that may be sampled
};

// busy[a] != 0: micro-batch a has a sample still growing on this rank; the agreement ORs busy over the ranks
// that run each forward together (in place; the same accum entries on each). Empty: this rank alone.
using MicroBatchAgreement = std::function<void(std::vector<uint8_t>& busy)>;

// As run_rollout (the same samples' order, seeds, stop rules and fields; no routing record), from `forward`.
std::vector<RolloutSample> sample_with_trainer(const RowsForward& forward, const TrainerRows& rows,
                                               const Tokenizer& tokenizer, const std::vector<const RlPrompt*>& prompts,
                                               int64_t group, const RolloutSettings& settings, uint64_t seed,
                                               RolloutStats* stats = nullptr, const MicroBatchAgreement& agree = {});

}  // namespace zaya
