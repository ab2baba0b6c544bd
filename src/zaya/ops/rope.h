#pragma once
// Partial rotary position embedding, NeoX "rotate_half" layout (spec §3 step 7):
// only the first `rot_dim` channels of each head rotate; pairs are (i, i + rot_dim/2),
// inv_freq[i] = theta^(-2i/rot_dim); the remaining channels pass through.

#include <cstdint>
#include <vector>

namespace zaya {

// How the angles are computed (spec §11 "RoPE precision"). kF64: inverse
// frequencies and angles in float64, the tables rounded once at the end.
// kF32: the reference's way, inv_freq = 1 / theta^(2i/rot_dim) and
// angle = pos * inv_freq each rounded to float32 (theta too), then cos/sin of
// that float32 angle; at 32K positions the tables differ by about 1e-3.
enum class RopePrecision { kF64, kF32 };

// cos/sin tables for positions 0..max_pos-1, each row rot_dim/2 wide.
struct RopeTable {
  int64_t max_pos = 0;
  int64_t half = 0;
  std::vector<float> cos_Sr, sin_Sr;
  std::vector<double> cos_Sr_f64, sin_Sr_f64;

  void build(int64_t max_positions, int64_t rot_dim, double theta, RopePrecision precision = RopePrecision::kF64);
  template <typename T>
  const T* cos_table() const;
  template <typename T>
  const T* sin_table() const;
};

// In place on x_THd ([tokens, heads, d]); token t sits at position pos_T[t].
// inverse = true applies the transpose rotation (the backward pass).
template <typename T>
void rope_apply(T* x_THd, const int32_t* pos_T, int64_t tokens, int64_t heads, int64_t d, const RopeTable& table,
                bool inverse);

}  // namespace zaya
