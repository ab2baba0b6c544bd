#include "zaya/infer/sampling.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"

namespace zaya {

void SamplingOptions::validate() const {
  ZAYA_CHECK_USAGE(temperature >= 0 && temperature <= 100, "--temperature {} is invalid; allowed: 0 (greedy) .. 100",
                   temperature);
  ZAYA_CHECK_USAGE(top_k >= 0, "--top-k {} is invalid; allowed: >= 0 (0 disables)", top_k);
  ZAYA_CHECK_USAGE(top_p > 0 && top_p <= 1, "--top-p {} is invalid; allowed: (0, 1]", top_p);
}

int32_t sample_token(const float* logits, int64_t real_vocab, const SamplingOptions& o, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& cand) {
  if (o.temperature == 0) {
    int64_t best = 0;
    for (int64_t v = 1; v < real_vocab; ++v)
      if (logits[v] > logits[best]) best = v;
    return int32_t(best);
  }
  const float inv_t = float(1.0 / o.temperature);
  // Candidates as (exp(logit / T - max), id), sorted by probability (ties: lower id first).
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  double total = 0;  // the mass the nucleus is measured against
  int64_t n = 0;
  if (o.top_k > 0 && o.top_k < real_vocab) {
    cand.resize(real_vocab);
    for (int64_t v = 0; v < real_vocab; ++v) cand[v] = {logits[v] * inv_t, int32_t(v)};
    std::partial_sort(cand.begin(), cand.begin() + o.top_k, cand.end(), by_prob);
    n = o.top_k;
    const float mx = cand[0].first;
    for (int64_t i = 0; i < n; ++i) {
      cand[i].first = std::exp(cand[i].first - mx);
      total += cand[i].first;
    }
  } else {
    float mx = logits[0] * inv_t;
    for (int64_t v = 1; v < real_vocab; ++v) mx = std::max(mx, logits[v] * inv_t);
    for (int64_t v = 0; v < real_vocab; ++v) total += std::exp(logits[v] * inv_t - mx);
    if (o.top_p >= 1) {
      // The whole distribution: one scan, no sort.
      double u = rng.next_double() * total;
      int64_t last = 0;
      for (int64_t v = 0; v < real_vocab; ++v) {
        const double p = std::exp(logits[v] * inv_t - mx);
        if (p > 0) last = v;
        u -= p;
        if (u <= 0) return int32_t(v);
      }
      return int32_t(last);
    }
    // The nucleus lies inside {p >= (1 - top_p) / V}: everything below carries
    // less than 1 - top_p of the mass in all, so the tokens above it reach
    // top_p on their own. Sorting only those is exact and cheap for a 262k vocabulary.
    const double floor = (1.0 - o.top_p) / double(real_vocab) * total;
    cand.clear();
    for (int64_t v = 0; v < real_vocab; ++v) {
      const float p = std::exp(logits[v] * inv_t - mx);
      if (double(p) >= floor) cand.emplace_back(p, int32_t(v));
    }
    std::sort(cand.begin(), cand.end(), by_prob);
    n = int64_t(cand.size());
  }
  if (o.top_p < 1) {
    // The smallest prefix whose mass reaches top_p.
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
