#include "zaya/infer/linear.h"

#include <omp.h>

#include <algorithm>

#include "zaya/core/bf16.h"
#include "zaya/core/work_pool.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {
namespace {

// GEMM output staging is capped at this many floats (64 MB): the LM head of a
// 262k vocabulary then runs 64 rows per call.
constexpr int64_t kStagingFloats = int64_t(16) << 20;
constexpr int64_t kMaxChunkRows = 512;
// Row counts are padded to a multiple of this, so each weight shape needs at
// most kMaxChunkRows / kRowBucket oneDNN primitives.
constexpr int64_t kRowBucket = 32;

// int8 (Q8_0) weights always take their matvec kernel (is_q8; there is no int8 GEMM here): prefill on them is slower.
// So do MXFP4 and FP8 experts (ops/matvec_lowbit.h), prefill included.
bool use_matvec(int64_t tokens, int64_t max_tokens, const WeightMatrix& w, bool bf16_activations) {
  return tokens <= max_tokens || w.type == WeightType::kI8 || w.type == WeightType::kMXFP4 ||
         w.type == WeightType::kFP8 || (w.type == WeightType::kBF16 && !bf16_activations);
}

// An int8 matrix with columns: the int8 kernel over quantized activations.
bool is_q8(const WeightMatrix& w) { return w.type == WeightType::kI8 && w.cols > 0; }

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

void LinearRunner::run_q8(float* y, int64_t ldy, const WeightMatrix& w, bool accumulate) {
  const uint8_t* wq = static_cast<const uint8_t*>(w.data);
  if (xq_.tokens() * w.rows * w.cols < kDecodeParallelMinMacs)
    matvec_q8_rows(wq, 0, w.rows, xq_, y, ldy, accumulate);
  else
    matvec_q8(wq, w.rows, xq_, y, ldy, accumulate);
}

void LinearRunner::run(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens, const WeightMatrix& w,
                       bool accumulate) {
  if (tokens <= 0) return;
  if (is_q8(w)) {
    xq_.quantize(x, ldx, tokens, w.cols);
    run_q8(y, ldy, w, accumulate);
  } else if (use_matvec(tokens, matvec_max_tokens_, w, bf16_activations_)) {
    if (tokens * w.rows * w.cols < kDecodeParallelMinMacs) {
      matvec_rows(w.type, w.data, w.cols, 0, w.rows, x, ldx, tokens, y, ldy, accumulate);
      return;
    }
    matvec(w.type, w.data, w.cols, w.rows, x, ldx, tokens, y, ldy, accumulate);
  } else if (w.type == WeightType::kF32) {
    gemm<float>(false, true, tokens, w.rows, w.cols, 1.0f, x, ldx, static_cast<const float*>(w.data), w.cols,
                accumulate ? 1.0f : 0.0f, y, ldy);
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
  bool all_matvec = true, shared_q8 = true;
  const Product* q8 = nullptr;  // the first int8 product: the others must share its input
  int64_t macs = 0;
  for (const Product& p : products) {
    if (p.tokens <= 0) continue;
    all_matvec = all_matvec && use_matvec(p.tokens, matvec_max_tokens_, *p.w, bf16_activations_);
    macs += p.tokens * p.w->rows * p.w->cols;
    if (!is_q8(*p.w)) continue;
    if (q8 == nullptr)
      q8 = &p;
    else
      shared_q8 = shared_q8 && p.x == q8->x && p.ldx == q8->ldx && p.tokens == q8->tokens && p.w->cols == q8->w->cols;
  }
  // The int8 products read their input quantized once.
  if (q8 != nullptr && shared_q8) xq_.quantize(q8->x, q8->ldx, q8->tokens, q8->w->cols);
  const int threads = omp_get_max_threads();
  if (!all_matvec || !shared_q8 || threads <= 1 || macs < kDecodeParallelMinMacs) {
    for (const Product& p : products) {
      if (p.tokens <= 0) continue;
      if (is_q8(*p.w) && shared_q8)
        run_q8(p.y, p.ldy, *p.w, false);
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
  const Q8Activations& xq = xq_;
  pool_for(int64_t(pieces_.size()), threads, [&](int64_t i, int) {
    const Piece& c = pieces[i];
    const Product& p = products[size_t(c.product)];
    if (is_q8(*p.w))
      matvec_q8_rows(static_cast<const uint8_t*>(p.w->data), c.r0, c.r1, xq, p.y, p.ldy, false);
    else
      matvec_rows(p.w->type, p.w->data, p.w->cols, c.r0, c.r1, p.x, p.ldx, p.tokens, p.y, p.ldy, false);
  });
}

}  // namespace zaya
