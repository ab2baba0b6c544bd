#include "zaya/rl/trainer_sampler.h"

#include <algorithm>

#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/infer/sampling.h"
#include "zaya/ops/cross_entropy.h"

namespace zaya {

std::vector<RolloutSample> sample_with_trainer(const RowsForward& forward, const TrainerRows& shape,
                                               const Tokenizer& tok, const std::vector<const RlPrompt*>& prompts,
                                               int64_t group, const RolloutSettings& s, uint64_t seed,
                                               RolloutStats* stats, const MicroBatchAgreement& agree) {
  const int64_t B = shape.micro, S = shape.seq, V = shape.vocab;
  const size_t n = prompts.size() * size_t(group);
  ZAYA_CHECK(int64_t(n) <= B * shape.accum, "internal error: {} samples for {} rows", n, B * shape.accum);
  std::vector<RolloutSample> samples;
  std::vector<Rng> rngs;
  std::vector<int32_t> ids(size_t(B * S * shape.accum), 0);
  std::vector<int64_t> length(n);  // tokens in row j
  std::vector<bool> active(n, true);
  for (const RlPrompt* p : prompts)
    for (int64_t g = 0; g < group; ++g) {
      const size_t j = samples.size();
      ZAYA_CHECK(!p->ids.empty() && int64_t(p->ids.size()) <= S, "internal error: a prompt of {} tokens in rows of {}",
                 p->ids.size(), S);
      std::copy(p->ids.begin(), p->ids.end(), ids.begin() + int64_t(j) * S);
      length[j] = int64_t(p->ids.size());
      samples.push_back({p, {}, {}, {}, {}});
      rngs.push_back(sampling_rng(seed + j));
      active[j] = s.max_new_tokens > 0;
    }
  SamplingScratch scratch;
  int64_t generated = 0;
  const double t0 = now_seconds();
  std::vector<uint8_t> busy(size_t(shape.accum));
  for (;;) {
    // The micro-batches with a sample still growing (over the ranks that run each forward together).
    for (int64_t a = 0; a < shape.accum; ++a) {
      const size_t j0 = std::min(n, size_t(a * B)), j1 = std::min(n, size_t((a + 1) * B));
      busy[size_t(a)] =
          std::find(active.begin() + int64_t(j0), active.begin() + int64_t(j1), true) != active.begin() + int64_t(j1);
    }
    if (agree) agree(busy);
    if (std::none_of(busy.begin(), busy.end(), [](uint8_t b) { return b != 0; })) break;
    for (int64_t a = 0; a < shape.accum; ++a) {
      if (busy[size_t(a)] == 0) continue;
      const size_t j0 = std::min(n, size_t(a * B)), j1 = std::min(n, size_t((a + 1) * B));
      const float* logits = forward(a, ids.data() + a * B * S);
      for (size_t j = j0; j < j1; ++j) {
        if (!active[j]) continue;
        RolloutSample& out = samples[j];
        // The row of the last token held predicts the next one.
        const float* z = logits + ((int64_t(j) - a * B) * S + length[j] - 1) * V;
        const int32_t next = sample_token(z, shape.real_vocab, s.sampling, rngs[j], scratch);
        out.tokens.push_back(next);
        out.logprobs.push_back(-cross_entropy_row(z, next, shape.real_vocab));
        ++generated;
        if (length[j] < S) ids[j * size_t(S) + size_t(length[j])] = next;
        ++length[j];
        const bool stop_id = std::find(s.stop_ids.begin(), s.stop_ids.end(), next) != s.stop_ids.end();
        if (stop_id || int64_t(out.tokens.size()) >= s.max_new_tokens || length[j] > S ||
            completes_stop(tok, out.tokens, s.stop_strings))
          active[j] = false;
      }
    }
  }
  for (RolloutSample& out : samples) out.text = cut_at_stop(tok.decode(out.tokens), s.stop_strings);
  if (stats != nullptr) {
    stats->generated_tokens = generated;
    stats->seconds = now_seconds() - t0;
  }
  return samples;
}

}  // namespace zaya
