#include "zaya/ops/quant_linear.h"

#include <algorithm>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/q8_0.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {
namespace {

// Rows of one tile of `in`-wide rows.
int64_t tile_rows(int64_t in, int64_t out) {
  return std::clamp<int64_t>(kQuantTileFloats / std::max<int64_t>(in, 1), 1, out);
}

// Rows [r0, r0 + n) of w dequantized into tile [n, in].
void decode_tile(WeightType type, const uint8_t* w, int64_t in, int64_t r0, int64_t n, float* tile) {
  parallel_for(n, n * in, [&](int64_t r) { weight_row_f32(type, w, in, r0 + r, tile + r * in); });
}

}  // namespace

void QuantWeights::sort() {
  std::sort(matrices.begin(), matrices.end(), [](const Matrix& a, const Matrix& b) { return a.f32 < b.f32; });
}

const uint8_t* QuantWeights::rows_of(const float* w, int64_t cols) const {
  auto it =
      std::upper_bound(matrices.begin(), matrices.end(), w, [](const float* p, const Matrix& m) { return p < m.f32; });
  if (it == matrices.begin()) return nullptr;
  const Matrix& m = *(it - 1);
  const int64_t at = w - m.f32;
  if (at >= m.rows * m.cols) return nullptr;
  ZAYA_CHECK(m.cols == cols && at % cols == 0,
             "internal error: a product over a quantized matrix [{}, {}] read at element {} with {} columns", m.rows,
             m.cols, at, cols);
  return m.packed + at / cols * weight_row_bytes(type, cols);
}

void quant_linear_forward(QuantContext& ctx, WeightType type, float* y_TO, const float* x_TI, const uint8_t* w,
                          int64_t tokens, int64_t in, int64_t out, bool accumulate) {
  if (tokens <= 0 || out <= 0) return;
  const int64_t step = tile_rows(in, out);
  float* tile = ctx.tile.get(step * in);
  for (int64_t r0 = 0; r0 < out; r0 += step) {
    const int64_t n = std::min(step, out - r0);
    decode_tile(type, w, in, r0, n, tile);
    // y[:, r0 : r0 + n] (+)= x tile^T
    gemm<float>(false, true, tokens, n, in, 1.0f, x_TI, in, tile, in, accumulate ? 1.0f : 0.0f, y_TO + r0, out);
  }
}

void quant_linear_backward(QuantContext& ctx, WeightType type, float* dx_TI, const float* dy_TO, const uint8_t* w,
                           int64_t tokens, int64_t in, int64_t out) {
  if (tokens <= 0 || out <= 0 || dx_TI == nullptr) return;
  const int64_t step = tile_rows(in, out);
  float* tile = ctx.tile.get(step * in);
  for (int64_t r0 = 0; r0 < out; r0 += step) {
    const int64_t n = std::min(step, out - r0);
    decode_tile(type, w, in, r0, n, tile);
    // dx += dy[:, r0 : r0 + n] tile
    gemm<float>(false, false, tokens, in, n, 1.0f, dy_TO + r0, out, tile, in, 1.0f, dx_TI, in);
  }
}

void quantize_weight_row(WeightType type, const float* x, int64_t n, uint8_t* dst) {
  switch (type) {
    case WeightType::kMXFP4: quantize_mxfp4_row(x, n, dst); return;
    case WeightType::kFP8: quantize_fp8_channel_row(x, n, dst); return;
    case WeightType::kI8: {
      std::vector<uint8_t> blocks(size_t(q8_0_row_bytes(n)));
      quantize_q8_0(x, n, blocks.data());
      q8_0_blocks_to_split(blocks.data(), n, dst);
      return;
    }
    default: fail("internal error: quantize_weight_row to {}", weight_type_name(type));
  }
}

}  // namespace zaya
