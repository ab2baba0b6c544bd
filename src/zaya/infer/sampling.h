#pragma once
// Choosing the next token from a row of logits: greedy, or temperature with
// optional top-k and top-p (nucleus) filtering, from a seeded counter-based
// generator (so a seed reproduces a sample). Padding rows of the vocabulary
// (ids >= real_vocab) are never chosen. Weights are exp((logit - max) / T),
// exact for the top token at any T, so a tiny T > 0 gives the greedy token.

#include <cstdint>
#include <vector>

#include "zaya/core/rng.h"

namespace zaya {

struct SamplingOptions {
  double temperature = 0.8;  // 0: greedy
  int64_t top_k = 40;        // 0: no top-k filter
  double top_p = 0.95;       // 1: no nucleus filter
  uint64_t seed = 0;
  void validate() const;
};

// The generator a request with sampling seed `seed` draws from: one stream
// shared by every generator (full-sequence, cached decoder, server), so a seed
// gives the same tokens whichever of them runs the request.
inline Rng sampling_rng(uint64_t seed) { return Rng{seed, 0x9e4e, 0}; }

// The buffers sample_token reuses between calls (no allocation after the first).
struct SamplingScratch {
  std::vector<std::pair<float, int32_t>> candidates;  // a filtered draw's (weight, id)
  std::vector<float> weights;                         // the whole-distribution draw's weights, by id
  std::vector<double> block_sums;                     // and their block sums (below)
};

int32_t sample_token(const float* logits, int64_t real_vocab, const SamplingOptions& options, Rng& rng,
                     SamplingScratch& scratch);

// sample_token for each of n rows: row i of logits[i], with options[i] and
// generator *rngs[i] (one per row); out[i] and every generator's state are
// those sample_token gives the row alone (sampling_test.cc).
void sample_tokens(int64_t n, const float* const* logits, int64_t real_vocab, const SamplingOptions* const* options,
                   Rng* const* rngs, int32_t* out, SamplingScratch& scratch);

// The whole-distribution draw (temperature, top_k 0, top_p 1: what RL
// rollouts sample), one contract for every generator (full-sequence, cached
// decoder, server, the trainer's sampler), the same bits on every machine:
// over weights w_0 .. w_{n-1} (sample_token's exp((logit - max) / T); >= 0),
// at the generator's next double r in [0, 1):
//   - the ids are cut into blocks of 64 (the last padded with weight 0); a
//     block's sum s_b is taken in double in 8 lanes, lane j adding ids j,
//     j + 8, ..., j + 56 of the block in that order, the lanes then added as
//     ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7));
//   - total = s_0 + s_1 + ... in block order, u = r x total;
//   - the block: the first b with s_b > 0 and u - s_0 - ... - s_b <= 0
//     (u less the blocks before it, one subtraction at a time);
//   - inside it: the first id i with w_i > 0 and u' - w_first - ... - w_i <= 0
//     (u' = u less the blocks before), else the block's last positive weight;
//   - no such block (rounding, a NaN weight): the row's last id of positive
//     weight, else 0.
// A zero weight (a masked id, token_constraint.h) is never drawn unless
// every weight is 0. The blocked sums replaced two serial double sums over
// the whole vocabulary (one add waiting on the last: about 15% of an RL
// rollout; docs/rl.md "Speed"): the drawn token differs from theirs only
// where rounding moves u across an id boundary (rare; the distribution is the
// same). draw_whole_distribution is this draw over given weights (the tests'
// view of it).
int32_t draw_whole_distribution(const float* weights, int64_t n, double r);

// Whether sample_token takes the argmax for these logits (no draw): T = 0, or
// a T so small that 1/T overflows a float, or no finite logit.
bool sampling_is_greedy(const float* logits, int64_t real_vocab, const SamplingOptions& options);

// The distribution sample_token draws from: (probability, id) of every id it
// can choose (after temperature, top-k and top-p; the argmax alone, with
// probability 1, when greedy), probabilities summing to 1. Speculative
// sampling (spec_verify.h) applies the same filters to the target's rows.
void sampling_distribution(const float* logits, int64_t real_vocab, const SamplingOptions& options,
                           std::vector<std::pair<float, int32_t>>& dist);

}  // namespace zaya
