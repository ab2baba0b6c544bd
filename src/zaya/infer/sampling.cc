#include "zaya/infer/sampling.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/exp_f32.h"

namespace zaya {

void SamplingOptions::validate() const {
  ZAYA_CHECK_USAGE(temperature >= 0 && temperature <= 100, "--temperature {} is invalid; allowed: 0 (greedy) .. 100",
                   temperature);
  ZAYA_CHECK_USAGE(top_k >= 0, "--top-k {} is invalid; allowed: >= 0 (0 disables)", top_k);
  ZAYA_CHECK_USAGE(top_p > 0 && top_p <= 1, "--top-p {} is invalid; allowed: (0, 1]", top_p);
}

namespace {

// The first id of the largest logit: the id of the serial scan
// `if (logits[v] > logits[best]) best = v`. That scan skips NaNs (no
// comparison with one holds) unless logits[0] is one, so with logits[0] a
// number it is the first id of the largest non-NaN value: found here in
// vector lanes (the same comparison, whose maximum does not depend on the
// order), then its first id; else by the scan itself.
int64_t argmax(const float* logits, int64_t n) {
  if (logits[0] == logits[0]) {
    float mx = logits[0];
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < n; ++v) mx = logits[v] > mx ? logits[v] : mx;
    for (int64_t v = 0; v < n; ++v)
      if (logits[v] == mx) return v;
  }
  int64_t best = 0;  // logits[0] is NaN (nothing compares greater), or no id holds the maximum (not expected)
  for (int64_t v = 1; v < n; ++v)
    if (logits[v] > logits[best]) best = v;
  return best;
}

// exp((logit - max) / T) without the rounding trap of exp(logit / T - max / T).
// Scaling first and subtracting after leaves the top token's exponent as the
// rounding error of logit * (1/T): at T = 1e-9 and |logit| ~ 15 that is up to
// +-512 (the float ulp at 1.5e10), and exp overflows or underflows; GCC's
// default -ffp-contract=fast made it worse by fusing the multiply and subtract
// into one FMA. Subtracting the raw maximum first gives exactly 0 for the top
// token (and <= 0 for every other), so its weight is exactly 1 and the rest
// are in [0, 1], whatever T is. There is no multiply-then-add here to fuse,
// so the result does not depend on -ffp-contract.
struct TemperatureWeight {
  float max_logit, inv_t;
  float operator()(float logit) const {
    const float scaled = (logit - max_logit) * inv_t;  // <= 0; -inf for a far token at a tiny T
    return exp_f32(scaled);                            // the project's exp (core/exp_f32.h): -inf gives 0
  }
};

}  // namespace

namespace {

// The candidates a draw chooses from, as (weight, id) in cand[0..n), and the
// weights' total: the top-k filter, then the nucleus, of exp((logit - max) / T).
// With neither filter every id is a candidate, in id order.
int64_t sampling_candidates(const float* logits, int64_t real_vocab, const SamplingOptions& o,
                            const TemperatureWeight& weight, std::vector<std::pair<float, int32_t>>& cand,
                            double& total) {
  // Sorted by probability (ties: lower id first).
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  total = 0;  // the mass the nucleus is measured against
  int64_t n = 0;
  if (o.top_k > 0 && o.top_k < real_vocab) {
    // The k largest raw logits are the k most probable tokens at any T > 0.
    cand.resize(real_vocab);
    for (int64_t v = 0; v < real_vocab; ++v) cand[v] = {logits[v], int32_t(v)};
    std::partial_sort(cand.begin(), cand.begin() + o.top_k, cand.end(), by_prob);
    n = o.top_k;
    for (int64_t i = 0; i < n; ++i) {
      cand[i].first = weight(cand[i].first);
      total += cand[i].first;
    }
  } else if (o.top_p >= 1) {
    cand.resize(real_vocab);
    for (int64_t v = 0; v < real_vocab; ++v) {
      cand[v] = {weight(logits[v]), int32_t(v)};
      total += cand[v].first;
    }
    return real_vocab;
  } else {
    for (int64_t v = 0; v < real_vocab; ++v) total += weight(logits[v]);
    // The nucleus lies inside {p >= (1 - top_p) / V}: everything below carries
    // less than 1 - top_p of the mass in all, so the tokens above it reach
    // top_p on their own. Sorting only those is exact and cheap for a 262k vocabulary.
    const double floor = (1.0 - o.top_p) / double(real_vocab) * total;
    cand.clear();
    for (int64_t v = 0; v < real_vocab; ++v) {
      const float p = weight(logits[v]);
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
  return n;
}

// 1/T as a float, or 0 where the choice is the argmax: T = 0, a T whose 1/T
// overflows a float (below ~3e-39, or a denormal T: (max - max) * inf is NaN,
// and every other token's weight is 0 anyway), or a non-finite maximum (every
// logit -inf leaves nothing to weigh).
float inverse_temperature(const SamplingOptions& o, float max_logit) {
  const float inv_t = o.temperature > 0 ? float(1.0 / o.temperature) : 0.0f;
  return o.temperature == 0 || !std::isfinite(inv_t) || !std::isfinite(max_logit) ? 0.0f : inv_t;
}

// w[0, n) = weight(logits[0, n)) in vector lanes (exp_f32 gives the same bits there as one at a time).
constexpr int64_t kWeightBlock = 256;
void block_weights(const TemperatureWeight& weight, const float* logits, int64_t n, float* w) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) w[i] = weight(logits[i]);
}

// The whole-distribution draws of `lanes` rows (at most L) side by side: for
// each, its weights summed in id order in double, u = its generator's next
// double x that total, then the first id where u - w_0 - ... - w_v <= 0 with
// a positive weight (a masked id, weight 0, is never drawn:
// token_constraint.h), else the last id of positive weight. Each row's chain
// is the scalar loop's alone; the rows are interleaved so that their serial
// sums overlap. weight(l, v): row l's weight of id v.
template <int64_t L, typename Weight>
void draw_whole(int64_t lanes, int64_t V, const Weight& weight, Rng* const* rngs, int32_t* tokens) {
  double total[L] = {}, u[L];
  int64_t last[L] = {};
  bool done[L] = {};
  for (int64_t v = 0; v < V; ++v)
    for (int64_t l = 0; l < lanes; ++l) total[l] += weight(l, v);
  for (int64_t l = 0; l < lanes; ++l) u[l] = rngs[l]->next_double() * total[l];
  int64_t left = lanes;
  for (int64_t v = 0; v < V && left > 0; ++v)
    for (int64_t l = 0; l < lanes; ++l) {
      if (done[l]) continue;
      const double p = weight(l, v);
      if (p > 0) last[l] = v;
      u[l] -= p;
      if (u[l] <= 0 && p > 0) {
        tokens[l] = int32_t(v);
        done[l] = true;
        --left;
      }
    }
  for (int64_t l = 0; l < lanes; ++l)
    if (!done[l]) tokens[l] = int32_t(last[l]);
}

}  // namespace

int32_t sample_token(const float* logits, int64_t real_vocab, const SamplingOptions& o, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& cand) {
  const int64_t best = argmax(logits, real_vocab);
  const float mx = logits[best];
  const float inv_t = inverse_temperature(o, mx);
  if (inv_t == 0) return int32_t(best);  // greedy: no draw from the generator
  const TemperatureWeight weight{mx, inv_t};
  if ((o.top_k <= 0 || o.top_k >= real_vocab) && o.top_p >= 1) {
    // The whole distribution: no sort. The weights are computed once, in
    // vector lanes (exp_f32 gives the same bits there as one at a time), into
    // the scratch, and summed in id order in double, as a scalar loop would;
    // the draw then walks the stored weights.
    cand.resize(size_t(real_vocab));  // no allocation after the first call
    float w[kWeightBlock];
    for (int64_t v0 = 0; v0 < real_vocab; v0 += kWeightBlock) {
      const int64_t n = std::min(kWeightBlock, real_vocab - v0);
      block_weights(weight, logits + v0, n, w);
      for (int64_t i = 0; i < n; ++i) cand[size_t(v0 + i)].first = w[i];
    }
    Rng* const rngs[1] = {&rng};
    int32_t token = 0;
    draw_whole<1>(
        1, real_vocab, [&](int64_t, int64_t v) { return cand[size_t(v)].first; }, rngs, &token);
    return token;
  }
  double total = 0;
  const int64_t n = sampling_candidates(logits, real_vocab, o, weight, cand, total);
  double u = rng.next_double() * total;
  for (int64_t i = 0; i < n; ++i) {
    u -= cand[i].first;
    if (u <= 0) return cand[i].second;
  }
  return cand[n - 1].second;
}

void sample_tokens(int64_t n, const float* const* logits, int64_t real_vocab, const SamplingOptions* const* options,
                   Rng* const* rngs, int32_t* out, std::vector<float>& weights,
                   std::vector<std::pair<float, int32_t>>& scratch) {
  const int64_t V = real_vocab;
  weights.resize(size_t(kSampleLanes * V));
  int64_t lane_row[kSampleLanes];
  int64_t lanes = 0;
  // The rows in the lanes drawn together (draw_whole).
  const auto draw_lanes = [&] {
    Rng* lane_rngs[kSampleLanes];
    int32_t lane_tokens[kSampleLanes];
    for (int64_t l = 0; l < lanes; ++l) lane_rngs[l] = rngs[lane_row[l]];
    draw_whole<kSampleLanes>(
        lanes, V, [&](int64_t l, int64_t v) { return weights[size_t(l * V + v)]; }, lane_rngs, lane_tokens);
    for (int64_t l = 0; l < lanes; ++l) out[lane_row[l]] = lane_tokens[l];
    lanes = 0;
  };
  for (int64_t i = 0; i < n; ++i) {
    const SamplingOptions& o = *options[i];
    const float* row = logits[i];
    const int64_t best = argmax(row, V);
    const float inv_t = inverse_temperature(o, row[best]);
    if (inv_t == 0 || !((o.top_k <= 0 || o.top_k >= V) && o.top_p >= 1)) {
      out[i] = sample_token(row, V, o, *rngs[i], scratch);  // greedy or filtered: one at a time
      continue;
    }
    block_weights(TemperatureWeight{row[best], inv_t}, row, V, weights.data() + lanes * V);
    lane_row[lanes++] = i;
    if (lanes == kSampleLanes) draw_lanes();
  }
  if (lanes > 0) draw_lanes();
}

bool sampling_is_greedy(const float* logits, int64_t real_vocab, const SamplingOptions& o) {
  return inverse_temperature(o, logits[argmax(logits, real_vocab)]) == 0;
}

void sampling_distribution(const float* logits, int64_t real_vocab, const SamplingOptions& o,
                           std::vector<std::pair<float, int32_t>>& dist) {
  const int64_t best = argmax(logits, real_vocab);
  const float mx = logits[best];
  const float inv_t = inverse_temperature(o, mx);
  if (inv_t == 0) {
    dist.assign(1, {1.0f, int32_t(best)});
    return;
  }
  double total = 0;
  const int64_t n = sampling_candidates(logits, real_vocab, o, TemperatureWeight{mx, inv_t}, dist, total);
  dist.resize(size_t(n));
  for (auto& [p, id] : dist) p = float(double(p) / total);
}

}  // namespace zaya
