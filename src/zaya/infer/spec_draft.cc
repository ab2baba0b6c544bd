#include "zaya/infer/spec_draft.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

int64_t ngram_draft(std::span<const int32_t> context, int64_t max_tokens, const NgramDraftOptions& o,
                    std::vector<int32_t>& out) {
  ZAYA_ASSERT(o.min_ngram >= 1 && o.max_ngram >= o.min_ngram);
  out.clear();
  const int64_t S = int64_t(context.size());
  if (max_tokens <= 0 || S < 2) return 0;
  // One pass over the earlier ends e of a match (context[e] == the last token, e < S - 1): the length n of the
  // match ending there (at most max_ngram); the longest wins, the most recent of equals (the first one seen).
  const int32_t* c = context.data();
  int64_t best = 0, best_end = -1;
  for (int64_t e = S - 2; e >= 0 && best < o.max_ngram; --e) {
    if (c[e] != c[S - 1]) continue;
    const int64_t most = std::min(o.max_ngram, e + 1);
    int64_t n = 1;
    while (n < most && c[e - n] == c[S - 1 - n]) ++n;
    if (n > best) best = n, best_end = e;
  }
  if (best < o.min_ngram) return 0;
  // The tokens after the match; past the context's end the copy goes on with itself (the text repeats with
  // period S - from: "and the LORD, and the LORD," drafts K tokens, not one period).
  const int64_t from = best_end + 1, period = S - from;
  for (int64_t j = 0; j < max_tokens; ++j) out.push_back(j < period ? c[from + j] : out[size_t(j - period)]);
  return best;
}

void NgramDrafter::draft(std::span<const DraftJob> jobs) {
  for (const DraftJob& j : jobs) {
    const int64_t n = ngram_draft(j.context, j.max_tokens, options_, *j.tokens);
    if (j.evidence != nullptr) *j.evidence = n;
    j.q->clear();
  }
}

}  // namespace zaya
