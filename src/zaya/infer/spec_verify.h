#pragma once
// Checking a draft (speculative decoding, docs/inference.md "Speculative
// decoding"): the target ran one forward over the chunk [last token, d_1 ..
// d_k] (engine.h, StepChunk::speculative), so logit row i is its distribution
// after chunk token i, and row i predicts d_{i+1}.
//
// - Greedy rows (sampling_is_greedy): d_{i+1} is kept while it is the row's
//   argmax; the first row that disagrees, or row k after a fully kept draft,
//   gives the next token, chosen by sample_token as plain decoding chooses it.
//   The text is plain greedy decoding's, token for token (the engine gives each
//   row of a verification step the bits of a one-token step).
// - Sampled rows: the standard rejection rule (Leviathan et al. 2023, Chen et
//   al. 2023): with p the target's distribution after temperature, top-k and
//   top-p (sampling_distribution, the one sample_token draws from) and q the
//   draft's, d is kept with probability min(1, p(d) / q(d)); the first
//   rejected position draws its token from max(0, p - q), normalised; a fully
//   kept draft draws one more from row k. Each emitted token then follows p
//   exactly. An n-gram draft is a point mass (q(d) = 1): d is kept with
//   probability p(d), and a rejection draws from p without d.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/infer/sampling.h"

namespace zaya {

struct DraftVerdict {
  int64_t accepted = 0;  // draft tokens kept, d_1 .. d_accepted
  int32_t next = -1;     // the token after them (from row `accepted`)
};

// rows: the k + 1 logit rows of the chunk (row stride V, ids < real_vocab
// sampled); q_rows: nullptr for a point-mass draft (n-gram), else k rows of V
// probabilities, the distribution each draft token was drawn from.
DraftVerdict verify_draft(const float* rows, int64_t V, int64_t real_vocab, std::span<const int32_t> draft,
                          const float* q_rows, const SamplingOptions& options, Rng& rng, SamplingScratch& scratch);

}  // namespace zaya
