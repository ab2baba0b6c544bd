#include "zaya/rl/grpo.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"

namespace zaya {

std::vector<float> group_advantages(const std::vector<double>& rewards, int64_t group_size, bool std_normalize) {
  ZAYA_CHECK(group_size >= 1 && int64_t(rewards.size()) % group_size == 0,
             "internal error: {} rewards do not make groups of {}", rewards.size(), group_size);
  std::vector<float> adv(rewards.size());
  for (size_t g0 = 0; g0 < rewards.size(); g0 += size_t(group_size)) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < group_size; ++i) mean += rewards[g0 + size_t(i)];
    mean /= double(group_size);
    for (int64_t i = 0; i < group_size; ++i) var += (rewards[g0 + size_t(i)] - mean) * (rewards[g0 + size_t(i)] - mean);
    const double scale = std_normalize ? 1.0 / (std::sqrt(var / double(group_size)) + 1e-4) : 1.0;
    for (int64_t i = 0; i < group_size; ++i) adv[g0 + size_t(i)] = float((rewards[g0 + size_t(i)] - mean) * scale);
  }
  return adv;
}

void PolicyStats::add(const PolicyStats& o) {
  tokens += o.tokens;
  loss_sum += o.loss_sum;
  clipped += o.clipped;
  kl_sum += o.kl_sum;
  entropy_sum += o.entropy_sum;
  ratio_min = std::min(ratio_min, o.ratio_min);
  ratio_max = std::max(ratio_max, o.ratio_max);
  max_abs_shift = std::max(max_abs_shift, o.max_abs_shift);
}

void policy_token_weights(const float* logp_T, const float* logp_old_T, const float* ref_T, const float* adv_T,
                          const int32_t* targets_T, int64_t rows, double clip, double beta, float* w_T,
                          PolicyStats& s) {
  for (int64_t t = 0; t < rows; ++t) {
    if (targets_T[t] < 0) {
      w_T[t] = 0;
      continue;
    }
    const double shift = double(logp_T[t]) - double(logp_old_T[t]);
    const double ratio = std::exp(shift);
    const double a = adv_T[t];
    const double unclipped = ratio * a;
    const double clipped = std::clamp(ratio, 1.0 - clip, 1.0 + clip) * a;
    // The gradient flows through the smaller term; when the clipped one is strictly smaller it is constant.
    const bool cut = clipped < unclipped;
    double w = cut ? 0.0 : unclipped;
    double loss = -std::min(unclipped, clipped);
    if (ref_T != nullptr) {
      const double d = double(ref_T[t]) - double(logp_T[t]);
      const double k3 = std::exp(d) - d - 1.0;
      s.kl_sum += k3;
      loss += beta * k3;
      w += beta * (std::exp(d) - 1.0);
    }
    w_T[t] = float(w);
    s.tokens += 1;
    s.loss_sum += loss;
    s.clipped += cut ? 1 : 0;
    s.ratio_min = std::min(s.ratio_min, ratio);
    s.ratio_max = std::max(s.ratio_max, ratio);
    s.max_abs_shift = std::max(s.max_abs_shift, std::fabs(shift));
  }
}

double row_entropy(const float* z, int64_t vocab) {
  double mx = z[0];
  for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, double(z[v]));
  double sum = 0, weighted = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double e = std::exp(double(z[v]) - mx);
    sum += e;
    weighted += e * (double(z[v]) - mx);
  }
  return std::log(sum) - weighted / sum;
}

}  // namespace zaya
