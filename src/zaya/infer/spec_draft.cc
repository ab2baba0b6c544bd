#include "zaya/infer/spec_draft.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

int64_t ngram_draft(std::span<const int32_t> context, int64_t max_tokens, const NgramDraftOptions& o,
                    std::vector<int32_t>& out) {
  ZAYA_ASSERT(o.min_ngram >= 1 && o.max_ngram >= o.min_ngram);
  out.clear();
  const int64_t S = int64_t(context.size());
  if (max_tokens <= 0) return 0;
  for (int64_t n = std::min(o.max_ngram, S - 1); n >= o.min_ngram; --n) {
    const int32_t* tail = context.data() + S - n;
    // The most recent occurrence ending before the context's end: [i, i + n) with i + n < S.
    for (int64_t i = S - n - 1; i >= 0; --i) {
      if (!std::equal(tail, tail + n, context.data() + i)) continue;
      const int64_t from = i + n, count = std::min(max_tokens, S - from);
      out.assign(context.begin() + from, context.begin() + from + count);
      return n;
    }
  }
  return 0;
}

void NgramDrafter::draft(std::span<const DraftJob> jobs) {
  for (const DraftJob& j : jobs) {
    const int64_t n = ngram_draft(j.context, j.max_tokens, options_, *j.tokens);
    if (j.evidence != nullptr) *j.evidence = n;
    j.q->clear();
  }
}

}  // namespace zaya
