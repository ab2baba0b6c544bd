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
void block_weights(const TemperatureWeight& weight, const float* logits, int64_t n, float* w) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) w[i] = weight(logits[i]);
}

// The whole-distribution draw's sums (sampling.h "The whole-distribution
// draw"): a block of kDrawBlock weights summed in double in kDrawLanes lanes,
// lane j adding the block's ids j, j + 8, ..., j + 56 in that order, then the
// lanes paired as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)). Each lane's sum
// is its own chain of adds and the pairing is written out, so the compiler
// vectorises the lanes (AVX-512: one vector; AVX2: two) without reordering
// any add: the bits are those of this loop run one add at a time, on every
// target (no -ffast-math here, and no multiply for -ffp-contract to fuse).
constexpr int64_t kDrawBlock = 64, kDrawLanes = 8;
double block_sum(const float* w) {
  double lane[kDrawLanes] = {};
  for (int64_t k = 0; k < kDrawBlock; k += kDrawLanes)
    for (int64_t j = 0; j < kDrawLanes; ++j) lane[j] += double(w[k + j]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// The whole-distribution draw over ids [0, n) at uniform r (sampling.h):
// w[0, blocks x kDrawBlock) the weights (ids >= n weigh 0), sums[0, blocks)
// filled here with the block sums. One pass sums the blocks (in vector
// lanes); the walk then takes one subtraction per block and at most
// kDrawBlock inside the chosen one.
int32_t draw_blocks(const float* w, int64_t n, double* sums, double r) {
  const int64_t blocks = (n + kDrawBlock - 1) / kDrawBlock;
  double total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += sums[b] = block_sum(w + b * kDrawBlock);
  double u = r * total;
  for (int64_t b = 0; b < blocks; ++b) {
    const double s = sums[b];
    if (s > 0 && u - s <= 0) {  // the block u lands in: the first id where u - w_0 - ... - w_i <= 0
      const float* wb = w + b * kDrawBlock;
      int64_t last = 0;
      for (int64_t i = 0; i < kDrawBlock; ++i) {
        const double p = wb[i];
        if (p > 0) last = i;
        u -= p;
        if (u <= 0 && p > 0) return int32_t(b * kDrawBlock + i);
      }
      return int32_t(b * kDrawBlock + last);  // rounding left u above 0: the block's last positive weight
    }
    u -= s;
  }
  // Rounding (or a NaN weight) left u above 0 after every block: the last id of positive weight, else 0.
  for (int64_t v = n - 1; v >= 0; --v)
    if (w[v] > 0) return int32_t(v);
  return 0;
}

// Sizes the scratch for a draw over n ids: the weights padded to whole blocks with 0.
void size_draw(SamplingScratch& s, int64_t n) {
  const int64_t blocks = (n + kDrawBlock - 1) / kDrawBlock;
  s.weights.resize(size_t(blocks * kDrawBlock));
  s.block_sums.resize(size_t(blocks));
  std::fill(s.weights.begin() + n, s.weights.end(), 0.0f);
}

}  // namespace

int32_t sample_token(const float* logits, int64_t real_vocab, const SamplingOptions& o, Rng& rng,
                     SamplingScratch& scratch) {
  const int64_t best = argmax(logits, real_vocab);
  const float mx = logits[best];
  const float inv_t = inverse_temperature(o, mx);
  if (inv_t == 0) return int32_t(best);  // greedy: no draw from the generator
  const TemperatureWeight weight{mx, inv_t};
  if ((o.top_k <= 0 || o.top_k >= real_vocab) && o.top_p >= 1) {
    // The whole distribution: no sort. The weights in vector lanes (exp_f32
    // gives the same bits there as one at a time), then the blocked draw.
    size_draw(scratch, real_vocab);
    block_weights(weight, logits, real_vocab, scratch.weights.data());
    return draw_blocks(scratch.weights.data(), real_vocab, scratch.block_sums.data(), rng.next_double());
  }
  std::vector<std::pair<float, int32_t>>& cand = scratch.candidates;
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
                   Rng* const* rngs, int32_t* out, SamplingScratch& scratch) {
  for (int64_t i = 0; i < n; ++i) out[i] = sample_token(logits[i], real_vocab, *options[i], *rngs[i], scratch);
}

int32_t draw_whole_distribution(const float* weights, int64_t n, double r) {
  SamplingScratch s;
  size_draw(s, n);
  std::copy(weights, weights + n, s.weights.begin());
  return draw_blocks(s.weights.data(), n, s.block_sums.data(), r);
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
