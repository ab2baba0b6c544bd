#pragma once
// Finite-difference gradient checking in double precision, for the op tests.
// Every op's backward is checked against central differences of
// loss = sum(probe * forward(...)) with a random probe vector.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "zaya/core/rng.h"

namespace zaya::testing {

inline std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0, double offset = 0.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * normal01(seed, 99, i);
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// d loss / d x by central differences; `loss` re-runs the forward pass.
template <typename LossFn>
std::vector<double> numeric_gradient(std::vector<double>& x, LossFn loss, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    x[i] = saved + h;
    double up = loss();
    x[i] = saved - h;
    double down = loss();
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// Largest |a - n| / max(1, |a|, |n|) over the elements.
inline double max_gradient_error(const std::vector<double>& analytic, const std::vector<double>& numeric) {
  double worst = 0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    double scale = std::max({1.0, std::fabs(analytic[i]), std::fabs(numeric[i])});
    worst = std::max(worst, std::fabs(analytic[i] - numeric[i]) / scale);
  }
  return worst;
}

template <typename LossFn>
void expect_gradient(const std::string& what, std::vector<double>& x, const std::vector<double>& analytic, LossFn loss,
                     double tol = 1e-6) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  std::vector<double> numeric = numeric_gradient(x, loss);
  double err = max_gradient_error(analytic, numeric);
  EXPECT_LT(err, tol) << "gradient of " << what << " disagrees with finite differences";
  // Guard against a vacuous check: the gradient must not be identically zero.
  double norm = 0;
  for (double v : numeric) norm += v * v;
  EXPECT_GT(norm, 0.0) << "finite-difference gradient of " << what << " is zero: the check would be vacuous";
}

inline std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace zaya::testing
