#include "zaya/ops/rope.h"

#include <cmath>

#include "zaya/core/error.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {

void RopeTable::build(int64_t max_positions, int64_t rot_dim, double theta, RopePrecision precision) {
  ZAYA_ASSERT(rot_dim % 2 == 0);
  max_pos = max_positions;
  half = rot_dim / 2;
  cos_Sr.resize(max_pos * half);
  sin_Sr.resize(max_pos * half);
  cos_Sr_f64.resize(max_pos * half);
  sin_Sr_f64.resize(max_pos * half);
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double angle;
      if (precision == RopePrecision::kF32) {
        const float inv_freq = 1.0f / std::pow(float(theta), float(2 * i) / float(rot_dim));
        angle = double(float(p) * inv_freq);
      } else {
        angle = double(p) * std::pow(theta, -2.0 * double(i) / double(rot_dim));
      }
      cos_Sr_f64[p * half + i] = std::cos(angle);
      sin_Sr_f64[p * half + i] = std::sin(angle);
      cos_Sr[p * half + i] = float(cos_Sr_f64[p * half + i]);
      sin_Sr[p * half + i] = float(sin_Sr_f64[p * half + i]);
    }
}

template <>
const float* RopeTable::cos_table<float>() const {
  return cos_Sr.data();
}
template <>
const float* RopeTable::sin_table<float>() const {
  return sin_Sr.data();
}
template <>
const double* RopeTable::cos_table<double>() const {
  return cos_Sr_f64.data();
}
template <>
const double* RopeTable::sin_table<double>() const {
  return sin_Sr_f64.data();
}

template <typename T>
void rope_apply(T* x, const int32_t* pos, int64_t tokens, int64_t heads, int64_t d, const RopeTable& table,
                bool inverse) {
  const int64_t half = table.half;
  const T* cos_t = table.cos_table<T>();
  const T* sin_t = table.sin_table<T>();
  const T sign = inverse ? T(-1) : T(1);
  for (int64_t t = 0; t < tokens; ++t)
    ZAYA_CHECK(pos[t] >= 0 && pos[t] < table.max_pos, "position {} is outside the RoPE table (0..{})", pos[t],
               table.max_pos - 1);
  parallel_for(tokens, 2 * tokens * heads * d, [&](int64_t t) {
    const T* c = cos_t + int64_t(pos[t]) * half;
    const T* s = sin_t + int64_t(pos[t]) * half;
    for (int64_t h = 0; h < heads; ++h) {
      T* v = x + (t * heads + h) * d;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        T x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c[i] - sign * x2 * s[i];
        v[i + half] = x2 * c[i] + sign * x1 * s[i];
      }
    }
  });
}

template void rope_apply<float>(float*, const int32_t*, int64_t, int64_t, int64_t, const RopeTable&, bool);
template void rope_apply<double>(double*, const int32_t*, int64_t, int64_t, int64_t, const RopeTable&, bool);

}  // namespace zaya
