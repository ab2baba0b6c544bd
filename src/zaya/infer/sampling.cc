#include "zaya/infer/sampling.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"

namespace zaya {

void SamplingOptions::validate() const {
  ZAYA_CHECK(temperature >= 0 && temperature <= 100, "--temperature {} is invalid; allowed: 0 (greedy) .. 100",
             temperature);
  ZAYA_CHECK(top_k >= 0, "--top-k {} is invalid; allowed: >= 0 (0 disables)", top_k);
  ZAYA_CHECK(top_p > 0 && top_p <= 1, "--top-p {} is invalid; allowed: (0, 1]", top_p);
}

int32_t sample_token(const float* logits, int64_t real_vocab, const SamplingOptions& o, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& cand) {
  if (o.temperature == 0) {
    int64_t best = 0;
    for (int64_t v = 1; v < real_vocab; ++v)
      if (logits[v] > logits[best]) best = v;
    return int32_t(best);
  }
  cand.resize(real_vocab);
  for (int64_t v = 0; v < real_vocab; ++v) cand[v] = {logits[v] / float(o.temperature), int32_t(v)};
  int64_t n = real_vocab;
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  if (o.top_k > 0 && o.top_k < n) {
    std::partial_sort(cand.begin(), cand.begin() + o.top_k, cand.end(), by_logit);
    n = o.top_k;
  } else {
    std::sort(cand.begin(), cand.end(), by_logit);
  }
  // Softmax over the survivors, then the smallest prefix whose mass reaches top_p.
  const float mx = cand[0].first;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    cand[i].first = std::exp(cand[i].first - mx);
    total += cand[i].first;
  }
  if (o.top_p < 1) {
    double mass = 0;
    int64_t keep = 0;
    while (keep < n) {
      mass += cand[keep].first / total;
      ++keep;
      if (mass >= o.top_p) break;
    }
    n = keep;
    total = 0;
    for (int64_t i = 0; i < n; ++i) total += cand[i].first;
  }
  double u = rng.next_double() * total;
  for (int64_t i = 0; i < n; ++i) {
    u -= cand[i].first;
    if (u <= 0) return cand[i].second;
  }
  return cand[n - 1].second;
}

}  // namespace zaya
