#include "zaya/infer/spec_verify.h"

#include <algorithm>

namespace zaya {
namespace {

// One draw from max(0, p - q) normalised (q: the draft's row, or a point mass
// at `drafted` when null); from p itself if nothing is left (rounding).
int32_t draw_residual(const std::vector<std::pair<float, int32_t>>& p, const float* q, int32_t drafted, Rng& rng) {
  auto residual = [&](const std::pair<float, int32_t>& e) {
    const double qv = q != nullptr ? double(q[e.second]) : e.second == drafted ? 1.0 : 0.0;
    return std::max(0.0, double(e.first) - qv);
  };
  double total = 0;
  for (const auto& e : p) total += residual(e);
  const bool plain = !(total > 0);
  if (plain)
    for (const auto& e : p) total += e.first;
  double u = rng.next_double() * total;
  int32_t last = p.back().second;
  for (const auto& e : p) {
    const double w = plain ? double(e.first) : residual(e);
    if (w > 0) last = e.second;
    u -= w;
    if (u <= 0 && w > 0) return e.second;
  }
  return last;
}

}  // namespace

DraftVerdict verify_draft(const float* rows, int64_t V, int64_t real_vocab, std::span<const int32_t> draft,
                          const float* q_rows, const SamplingOptions& o, Rng& rng, SamplingScratch& scratch) {
  const int64_t k = int64_t(draft.size());
  for (int64_t i = 0; i < k; ++i) {
    const float* row = rows + i * V;
    const int32_t d = draft[size_t(i)];
    if (sampling_is_greedy(row, real_vocab, o)) {
      const int32_t best = sample_token(row, real_vocab, o, rng, scratch);  // the argmax, no draw
      if (best != d) return {i, best};
      continue;
    }
    std::vector<std::pair<float, int32_t>>& dist = scratch.candidates;
    sampling_distribution(row, real_vocab, o, dist);
    double p = 0;
    for (const auto& e : dist)
      if (e.second == d) p = e.first;
    const float* q = q_rows != nullptr ? q_rows + i * V : nullptr;
    const double qd = q != nullptr ? double(q[d]) : 1.0;
    // Keep d with probability min(1, p / q).
    if (rng.next_double() * qd < p) continue;
    return {i, draw_residual(dist, q, d, rng)};
  }
  return {k, sample_token(rows + k * V, real_vocab, o, rng, scratch)};
}

}  // namespace zaya
