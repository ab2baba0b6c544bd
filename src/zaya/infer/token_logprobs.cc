#include "zaya/infer/token_logprobs.h"

#include <algorithm>
#include <cmath>

namespace zaya {

TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int32_t chosen, int64_t top) {
  float mx = logits[0];
  for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, logits[v]);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(logits[v] - mx));
  const double log_z = double(mx) + std::log(sum);
  TokenLogprobs out;
  out.chosen = float(double(logits[chosen]) - log_z);
  top = std::min(top, vocab);
  if (top <= 0) return out;
  std::vector<int32_t> ids(vocab);
  for (int64_t v = 0; v < vocab; ++v) ids[v] = int32_t(v);
  std::partial_sort(ids.begin(), ids.begin() + top, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (int64_t i = 0; i < top; ++i) out.top.emplace_back(ids[i], float(double(logits[ids[i]]) - log_z));
  return out;
}

}  // namespace zaya
