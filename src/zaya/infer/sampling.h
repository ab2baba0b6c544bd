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

// `scratch` is reused between calls (no allocation after the first).
int32_t sample_token(const float* logits, int64_t real_vocab, const SamplingOptions& options, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& scratch);

// sample_token for n rows at once: row i of logits[i], with options[i] and
// generator *rngs[i] (one per row); out[i] and every generator's state are
// those sample_token gives the row alone, bit for bit (sampling_test.cc). The
// whole-distribution draws (top_k 0, top_p 1: RL rollouts), whose two serial
// double sums over the vocabulary wait on each add one row at a time, run
// kSampleLanes rows side by side; other rows take sample_token. `weights`
// is reused between calls (no allocation after the first).
inline constexpr int64_t kSampleLanes = 8;
void sample_tokens(int64_t n, const float* const* logits, int64_t real_vocab, const SamplingOptions* const* options,
                   Rng* const* rngs, int32_t* out, std::vector<float>& weights,
                   std::vector<std::pair<float, int32_t>>& scratch);

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
