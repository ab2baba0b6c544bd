#include "zaya/infer/linear.h"

#include <omp.h>

#include <algorithm>

#include "zaya/core/bf16.h"
#include "zaya/core/work_pool.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/ops/matvec_lowbit.h"
#include "zaya/ops/matvec_mxfp4_q8.h"

namespace zaya {
namespace {

// GEMM output staging is capped at this many floats (64 MB): the LM head of a
// 262k vocabulary then runs 64 rows per call.
constexpr int64_t kStagingFloats = int64_t(16) << 20;
constexpr int64_t kMaxChunkRows = 512;
// Row counts are padded to a multiple of this, so each weight shape needs at
// most kMaxChunkRows / kRowBucket oneDNN primitives.
constexpr int64_t kRowBucket = 32;

// int8 (Q8_0) weights always take their matvec kernel (there is no int8 GEMM here): prefill on them is slower.
// MXFP4 and FP8 ones (ops/matvec_lowbit.h) take a GEMM over dequantized tiles beyond max_tokens.
bool use_matvec(int64_t tokens, int64_t max_tokens, const WeightMatrix& w, bool bf16_activations) {
  return tokens <= max_tokens || w.type == WeightType::kI8 || (w.type == WeightType::kBF16 && !bf16_activations);
}

// Products over int8-quantized activations (in their matvec kernel): int8 matrices with columns, and MXFP4 ones
// unless ZAYA_MXFP4_ACTIVATIONS=float (ops/matvec_mxfp4_q8.h).
bool is_q8(const WeightMatrix& w) {
  return (w.type == WeightType::kI8 && w.cols > 0) || (w.type == WeightType::kMXFP4 && mxfp4_int8_activations());
}

// Rows [r0, r1) of an int8-input product on the calling thread.
void q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
             bool accumulate) {
  const uint8_t* wq = static_cast<const uint8_t*>(w.data);
  if (w.type == WeightType::kMXFP4)
    matvec_mxfp4_q8_rows(wq, r0, r1, xq, y, ldy, accumulate);
  else
    matvec_q8_rows(wq, r0, r1, xq, y, ldy, accumulate);
}

// Dequantized rows per tile of gemm_lowbit_rows: 4 MB of f32, at least 16 rows.
constexpr int64_t kLowbitTileFloats = int64_t(1) << 20;

}  // namespace

LinearRunner::LinearRunner(int64_t max_in, int64_t max_out, bool bf16_activations)
    : max_in_(max_in), max_out_(max_out), bf16_activations_(bf16_activations) {
  chunk_rows_ = std::clamp<int64_t>(kStagingFloats / std::max<int64_t>(max_out, 1) / kRowBucket * kRowBucket,
                                    kRowBucket, kMaxChunkRows);
}

void LinearRunner::gemm_bf16_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens,
                                  const WeightMatrix& w, bool accumulate) {
  const int64_t I = w.cols, O = w.rows;
  ZAYA_ASSERT(I <= max_in_ && O <= max_out_);
  if (!xb_) {
    xb_ = aligned_alloc_array<uint16_t>(size_t(chunk_rows_ * max_in_));
    cbuf_ = aligned_alloc_array<float>(size_t(chunk_rows_ * max_out_));
  }
  const uint16_t* wb = static_cast<const uint16_t*>(w.data);
  for (int64_t t0 = 0; t0 < tokens; t0 += chunk_rows_) {
    const int64_t n = std::min(chunk_rows_, tokens - t0);
    const int64_t padded = (n + kRowBucket - 1) / kRowBucket * kRowBucket;
    uint16_t* xb = xb_.get();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < padded; ++r) {
      uint16_t* dst = xb + r * I;
      if (r < n) {
        const float* src = x + (t0 + r) * ldx;
        for (int64_t i = 0; i < I; ++i) dst[i] = float_to_bf16(src[i]);
      } else {
        std::fill(dst, dst + I, uint16_t(0));
      }
    }
    float* c = cbuf_.get();
    gemm_bf16(gemms_, false, true, padded, O, I, xb, I, wb, I, c, O);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      float* dst = y + (t0 + r) * ldy;
      const float* src = c + r * O;
      if (accumulate)
        for (int64_t o = 0; o < O; ++o) dst[o] += src[o];
      else
        std::copy(src, src + O, dst);
    }
  }
}

void LinearRunner::gemm_lowbit_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens,
                                    const WeightMatrix& w, bool accumulate) {
  const int64_t I = w.cols, O = w.rows;
  const int64_t tile = std::min(O, std::max<int64_t>(16, kLowbitTileFloats / std::max<int64_t>(I, 1)));
  if (int64_t(wtile_.size()) < tile * I) wtile_.resize(size_t(tile * I));
  float* wt = wtile_.data();
  for (int64_t r0 = 0; r0 < O; r0 += tile) {
    const int64_t n = std::min(tile, O - r0);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; r += 16)
      lowbit_rows_f32(w.type, static_cast<const uint8_t*>(w.data), I, r0 + r, r0 + std::min(n, r + 16), wt + r * I);
    gemm<float>(false, true, tokens, n, I, 1.0f, x, ldx, wt, I, accumulate ? 1.0f : 0.0f, y + r0, ldy);
  }
}

namespace {

// An int8-input product over its quantized input, split over the work pool when large enough.
void run_q8(const Q8Activations& xq, float* y, int64_t ldy, const WeightMatrix& w, bool accumulate) {
  const uint8_t* wq = static_cast<const uint8_t*>(w.data);
  if (xq.tokens() * w.rows * w.cols < kDecodeParallelMinMacs)
    q8_rows(w, 0, w.rows, xq, y, ldy, accumulate);
  else if (w.type == WeightType::kMXFP4)
    matvec_mxfp4_q8(wq, w.rows, xq, y, ldy, accumulate);
  else
    matvec_q8(wq, w.rows, xq, y, ldy, accumulate);
}

}  // namespace

void LinearRunner::run(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens, const WeightMatrix& w,
                       bool accumulate) {
  if (tokens <= 0) return;
  const bool matvec_path = use_matvec(tokens, matvec_max_tokens_, w, bf16_activations_);
  if (is_q8(w) && matvec_path) {
    xq_.quantize(x, ldx, tokens, w.cols);
    run_q8(xq_, y, ldy, w, accumulate);
  } else if (matvec_path) {
    if (tokens * w.rows * w.cols < kDecodeParallelMinMacs) {
      matvec_rows(w.type, w.data, w.cols, 0, w.rows, x, ldx, tokens, y, ldy, accumulate);
      return;
    }
    matvec(w.type, w.data, w.cols, w.rows, x, ldx, tokens, y, ldy, accumulate);
  } else if (w.type == WeightType::kF32) {
    gemm<float>(false, true, tokens, w.rows, w.cols, 1.0f, x, ldx, static_cast<const float*>(w.data), w.cols,
                accumulate ? 1.0f : 0.0f, y, ldy);
  } else if (w.type == WeightType::kMXFP4 || w.type == WeightType::kFP8) {
    gemm_lowbit_rows(y, ldy, x, ldx, tokens, w, accumulate);
  } else {
    gemm_bf16_rows(y, ldy, x, ldx, tokens, w, accumulate);
  }
}

void LinearRunner::run_parts(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens,
                             std::span<const Part> parts) {
  products_.clear();
  for (const Part& p : parts) products_.push_back({p.w, x, ldx, tokens, y + p.col, ldy});
  run_products(products_);
}

void LinearRunner::run_products(std::span<const Product> products) {
  bool all_matvec = true;
  int64_t macs = 0;
  // Each int8-input product's activations, quantized once per distinct input (run_parts' parts share one; the
  // experts of a step each have theirs).
  xq_of_.assign(products.size(), -1);
  size_t used = 0;
  for (size_t k = 0; k < products.size(); ++k) {
    const Product& p = products[k];
    if (p.tokens <= 0) continue;
    const bool matvec_path = use_matvec(p.tokens, matvec_max_tokens_, *p.w, bf16_activations_);
    all_matvec = all_matvec && matvec_path;
    macs += p.tokens * p.w->rows * p.w->cols;
    if (!matvec_path || !is_q8(*p.w)) continue;
    for (size_t j = 0; j < k && xq_of_[k] < 0; ++j) {
      const Product& q = products[j];
      if (xq_of_[j] >= 0 && q.x == p.x && q.ldx == p.ldx && q.tokens == p.tokens && q.w->cols == p.w->cols)
        xq_of_[k] = xq_of_[j];
    }
    if (xq_of_[k] >= 0) continue;
    if (xqs_.size() <= used) xqs_.emplace_back();
    xqs_[used].quantize(p.x, p.ldx, p.tokens, p.w->cols);
    xq_of_[k] = int(used++);
  }
  const int threads = omp_get_max_threads();
  if (!all_matvec || threads <= 1 || macs < kDecodeParallelMinMacs) {
    for (size_t k = 0; k < products.size(); ++k) {
      const Product& p = products[k];
      if (p.tokens <= 0) continue;
      if (xq_of_[k] >= 0)
        run_q8(xqs_[size_t(xq_of_[k])], p.y, p.ldy, *p.w, false);
      else
        run(p.y, p.ldy, p.x, p.ldx, p.tokens, *p.w);
    }
    return;
  }
  pieces_.clear();
  for (size_t k = 0; k < products.size(); ++k) {
    const Product& p = products[k];
    if (p.tokens <= 0) continue;
    const int64_t rows = p.w->rows, piece = matvec_piece_rows(rows, threads);
    for (int64_t r0 = 0; r0 < rows; r0 += piece) pieces_.push_back({int64_t(k), r0, std::min(rows, r0 + piece)});
  }
  const Piece* pieces = pieces_.data();
  const int* xq_of = xq_of_.data();
  const Q8Activations* xqs = xqs_.data();
  pool_for(int64_t(pieces_.size()), threads, [&](int64_t i, int) {
    const Piece& c = pieces[i];
    const Product& p = products[size_t(c.product)];
    if (xq_of[c.product] >= 0)
      q8_rows(*p.w, c.r0, c.r1, xqs[xq_of[c.product]], p.y, p.ldy, false);
    else
      matvec_rows(p.w->type, p.w->data, p.w->cols, c.r0, c.r1, p.x, p.ldx, p.tokens, p.y, p.ldy, false);
  });
}

}  // namespace zaya
