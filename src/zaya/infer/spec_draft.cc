#include "zaya/infer/spec_draft.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

void ngram_draft(std::span<const int32_t> context, int64_t max_tokens, const NgramDraftOptions& o,
                 std::vector<int32_t>& out) {
  ZAYA_ASSERT(o.min_ngram >= 1 && o.max_ngram >= o.min_ngram);
  out.clear();
  const int64_t S = int64_t(context.size());
  if (max_tokens <= 0) return;
  for (int64_t n = std::min(o.max_ngram, S - 1); n >= o.min_ngram; --n) {
    const int32_t* tail = context.data() + S - n;
    // The most recent occurrence ending before the context's end: [i, i + n) with i + n < S.
    for (int64_t i = S - n - 1; i >= 0; --i) {
      if (!std::equal(tail, tail + n, context.data() + i)) continue;
      const int64_t from = i + n, count = std::min(max_tokens, S - from);
      out.assign(context.begin() + from, context.begin() + from + count);
      return;
    }
  }
}

void NgramDrafter::draft(std::span<const DraftJob> jobs) {
  for (const DraftJob& j : jobs) {
    ngram_draft(j.context, j.max_tokens, options_, *j.tokens);
    j.q->clear();
  }
}

DraftLength::DraftLength(int64_t max_tokens, bool adaptive)
    : max_(max_tokens), k_(adaptive ? std::min<int64_t>(max_tokens, 2) : max_tokens), adaptive_(adaptive) {
  ZAYA_CHECK_USAGE(max_tokens >= 1 && max_tokens <= 64, "--spec-tokens {} is invalid; allowed: 1..64", max_tokens);
}

void DraftLength::skipped() {
  if (paused_ > 0 && --paused_ == 0) {
    k_ = 1;                    // probe with one token;
    misses_ = kMaxMisses - 1;  // if it fails, pause again
  }
}

void DraftLength::record(int64_t drafted, int64_t accepted) {
  if (!adaptive_ || drafted <= 0) return;
  if (accepted > 0) {
    k_ = std::min(max_, accepted == drafted ? std::max<int64_t>(1, 2 * drafted) : accepted + 1);
    misses_ = 0;
    pause_ = kPause;
  } else {
    k_ = 1;
    if (++misses_ >= kMaxMisses) {
      misses_ = 0;
      paused_ = pause_;
      pause_ = std::min(kMaxPause, 2 * pause_);
    }
  }
}

}  // namespace zaya
