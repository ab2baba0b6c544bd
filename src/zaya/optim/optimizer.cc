#include "zaya/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/sum_squares.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {

void OptimizerConfig::validate(const std::string& source) const {
  ZAYA_CHECK(lr > 0 && lr < 1, "{}: optim.lr = {} is invalid; allowed: (0, 1)", source, lr);
  ZAYA_CHECK(beta1 >= 0 && beta1 < 1, "{}: optim.beta1 = {} is invalid; allowed: [0, 1)", source, beta1);
  ZAYA_CHECK(beta2 >= 0 && beta2 < 1, "{}: optim.beta2 = {} is invalid; allowed: [0, 1)", source, beta2);
  ZAYA_CHECK(eps > 0, "{}: optim.eps = {} is invalid; allowed: > 0", source, eps);
  ZAYA_CHECK(weight_decay >= 0 && weight_decay < 10, "{}: optim.weight_decay = {} is invalid; allowed: [0, 10)", source,
             weight_decay);
  ZAYA_CHECK(muon_momentum >= 0 && muon_momentum < 1, "{}: optim.muon_momentum = {} is invalid; allowed: [0, 1)",
             source, muon_momentum);
  ZAYA_CHECK(ns_steps >= 1 && ns_steps <= 20, "{}: optim.ns_steps = {} is invalid; allowed: 1..20", source, ns_steps);
  ZAYA_CHECK(grad_clip >= 0, "{}: optim.grad_clip = {} is invalid; allowed: >= 0 (0 disables)", source, grad_clip);
}

namespace {

// dst[c, r] = scale * src[r, c] for a [rows, cols] src, in 32 x 32 tiles.
void transpose(float* dst, const float* src, int64_t rows, int64_t cols, float scale) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for collapse(2) schedule(static) if (rows * cols > 65536)
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) dst[c * rows + r] = scale * src[r * cols + c];
}

// C = alpha W W^T + beta C for W [m, k] and a symmetric C [m, m]. The result
// is symmetric, so with h = m / 2 two GEMMs compute rows [0, h) and the
// bottom-right block, and the bottom-left block is the mirror of the top-right:
// 3/4 of the multiply-adds. Below 256 rows the halves are too small to pay,
// and one GEMM does it all.
void symmetric_product(const float* w, int64_t m, int64_t k, float alpha, float beta, float* C) {
  const int64_t h = m / 2;
  if (m < 256) {
    gemm<float>(false, true, m, m, k, alpha, w, k, w, k, beta, C, m);
    return;
  }
  gemm<float>(false, true, h, m, k, alpha, w, k, w, k, beta, C, m);
  gemm<float>(false, true, m - h, m - h, k, alpha, w + h * k, k, w + h * k, k, beta, C + h * m + h, m);
#pragma omp parallel for schedule(static)
  for (int64_t i = h; i < m; ++i)
    for (int64_t j = 0; j < h; ++j) C[i * m + j] = C[j * m + i];
}

}  // namespace

void newton_schulz(float* x, int64_t rows, int64_t cols, int steps, float* scratch, uint16_t* scratch16,
                   Bf16GemmCache* gemms) {
  constexpr float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  const int64_t m = std::min(rows, cols);
  float* y = scratch;          // [rows, cols]
  float* A = y + rows * cols;  // [m, m]
  float* B = A + m * m;        // [m, m]
  const int64_t n = rows * cols;
  // The norm's sum is one float64 sum in a fixed order (core/sum_squares.h: its bits are the update's);
  // the element-wise passes run in parallel, fused with the bf16 rounding
  // that follows them (the same values as separate passes, fewer sweeps).
  const double ss = sum_squares(x, n);
  const float inv = float(1.0 / (std::sqrt(ss) + 1e-7));
  const bool wide = rows <= cols;  // work on the small Gram matrix
  if (scratch16 != nullptr) {
    ZAYA_CHECK(gemms != nullptr, "internal error: bf16 Newton-Schulz needs a GEMM cache");
    uint16_t* xb = scratch16;  // bf16(X)
    uint16_t* mb = xb + n;     // bf16(A), then bf16(B)
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      x[i] *= inv;
      xb[i] = float_to_bf16(x[i]);
    }
    for (int s = 0; s < steps; ++s) {
      if (wide)
        gemm_bf16(*gemms, false, true, m, m, cols, xb, cols, xb, cols, A, m);
      else
        gemm_bf16(*gemms, true, false, m, m, rows, xb, cols, xb, cols, A, m);
      convert_to_bf16(mb, A, m * m);
      gemm_bf16(*gemms, false, false, m, m, m, mb, m, mb, m, B, m);
#pragma omp parallel for schedule(static) if (m * m > 65536)
      for (int64_t i = 0; i < m * m; ++i) {
        B[i] = b * A[i] + c * B[i];
        mb[i] = float_to_bf16(B[i]);
      }
      if (wide)
        gemm_bf16(*gemms, false, false, rows, cols, m, mb, m, xb, cols, y, cols);
      else
        gemm_bf16(*gemms, false, false, rows, cols, m, xb, cols, mb, m, y, cols);
      const bool last = s + 1 == steps;
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) {
        x[i] = a * x[i] + y[i];
        if (!last) xb[i] = float_to_bf16(x[i]);
      }
    }
    return;
  }
  // float32: the iteration runs on the wide form (a tall X is transposed into
  // scratch and back), and the square product as A A^T (A is symmetric), so
  // every GEMM has the layouts oneDNN's sgemm runs fastest: on AVX2 the
  // X^T X (tn) and A A (nn) forms ran at 64-70% of its peak at 512 x 512,
  // the X X^T and A A^T (nt) ones at 90-100% (docs/performance.md). Both
  // products with a symmetric result compute 3/4 of it (symmetric_product).
  float* w = x;  // [m, k]: X, or X^T when X is tall
  const int64_t k = n / m;
  if (!wide) {
    w = A + 2 * m * m;  // after y, A, B
    transpose(w, x, rows, cols, inv);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
  }
  for (int s = 0; s < steps; ++s) {
    // A = W W^T; B = b A + c A A^T; W = a W + B W (A and B symmetric)
    symmetric_product(w, m, k, 1.0f, 0.0f, A);
    std::memcpy(B, A, sizeof(float) * m * m);
    symmetric_product(A, m, m, c, b, B);
    std::memcpy(y, w, sizeof(float) * n);
    gemm<float>(false, false, m, k, m, 1.0f, B, m, y, k, a, w, k);
  }
  if (!wide) transpose(x, w, cols, rows, 1.0f);
}

Optimizer::Optimizer(const ParamTable& table, const OptimizerConfig& config, const std::vector<size_t>* owned)
    : table_(table), config_(config) {
  const auto& entries = table.entries();
  if (owned != nullptr) {
    owned_ = *owned;
  } else {
    for (size_t i = 0; i < entries.size(); ++i) owned_.push_back(i);
  }
  state_offset_.assign(entries.size(), -1);
  int64_t state = 0, scratch = 0;
  for (size_t i : owned_) {
    const ParamEntry& e = entries[i];
    state_offset_[i] = state;
    state += e.numel;
    if (e.muon) {
      const int64_t rows = e.shape[0], cols = e.numel / e.shape[0], mn = std::min(rows, cols);
      scratch = std::max(scratch, 3 * rows * cols + 2 * mn * mn);
    }
  }
  m_.reset(std::max<int64_t>(state, 1));
  v_.reset(std::max<int64_t>(state, 1));
  m_.zero();
  v_.zero();
  ns_scratch_ = aligned_alloc_array<float>(std::max<int64_t>(scratch, 1));
  if (config.ns_dtype == NsDtype::kBF16 || (config.ns_dtype == NsDtype::kAuto && bf16_gemm_outruns_f32()))
    ns_scratch16_ = aligned_alloc_array<uint16_t>(std::max<int64_t>(scratch, 1));
  norm_partials_.resize(table.total_floats() / 65536 + owned_.size() + 1);
}

double Optimizer::owned_sum_squares(const float* grads) {
  ZAYA_PROFILE_SCOPE("optim.grad_norm");
  // Fixed 64K blocks of each owned entry, summed in order: the same result for any thread count.
  constexpr int64_t kBlock = 65536;
  double total = 0;
  for (size_t i : owned_) {
    const ParamEntry& e = table_.entries()[i];
    const float* g = grads + e.offset;
    const int64_t blocks = (e.numel + kBlock - 1) / kBlock;
    double* partial = norm_partials_.data();
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t begin = blk * kBlock, end = std::min(e.numel, begin + kBlock);
      partial[blk] = sum_squares(g + begin, end - begin);
    }
    for (int64_t blk = 0; blk < blocks; ++blk) total += partial[blk];
  }
  return total;
}

double Optimizer::step(float* params, float* grads, double lr_scale) {
  const double norm = std::sqrt(owned_sum_squares(grads));
  const double clip = (config_.grad_clip > 0 && norm > config_.grad_clip) ? config_.grad_clip / norm : 1.0;
  update(params, grads, lr_scale, clip);
  return norm;
}

void Optimizer::update(float* params, float* grads, double lr_scale, double clip_scale, const UpdateExtras& extras) {
  const float clip = float(clip_scale);
  ++step_;
  const float lr = float(config_.lr * lr_scale);
  const float b1 = float(config_.beta1), b2 = float(config_.beta2), eps = float(config_.eps);
  const float bc1 = float(1.0 - std::pow(config_.beta1, double(step_)));
  const float bc2 = float(1.0 - std::pow(config_.beta2, double(step_)));
  for (size_t idx : owned_) {
    const ParamEntry& e = table_.entries()[idx];
    float* w = params + e.offset;
    float* g = grads + e.offset;
    uint16_t* w16 = extras.bf16_params != nullptr ? extras.bf16_params + e.offset : nullptr;
    const bool zero = extras.zero_grads;
    float* em = m_.data() + state_offset_[idx];
    const float decay = e.weight_decay ? 1.0f - lr * float(config_.weight_decay) : 1.0f;
    if (config_.use_muon && e.muon) {
      ZAYA_PROFILE_SCOPE("optim.muon");
      const int64_t rows = e.shape[0], cols = e.numel / rows;
      const float mu = float(config_.muon_momentum);
      float* u = ns_scratch_.get();
      const bool nesterov = config_.muon_nesterov;
#pragma omp parallel for schedule(static) if (e.numel > 16384)
      for (int64_t i = 0; i < e.numel; ++i) {
        em[i] = mu * em[i] + clip * g[i];
        u[i] = nesterov ? clip * g[i] + mu * em[i] : em[i];
        if (zero) g[i] = 0.0f;
      }
      newton_schulz(u, rows, cols, config_.ns_steps, u + e.numel, ns_scratch16_.get(), &ns_gemms_);
      const float scale = lr * 0.2f * std::sqrt(float(std::max(rows, cols)));
#pragma omp parallel for schedule(static) if (e.numel > 16384)
      for (int64_t i = 0; i < e.numel; ++i) {
        w[i] = w[i] * decay - scale * u[i];
        if (w16 != nullptr) w16[i] = float_to_bf16(w[i]);
      }
    } else {
      ZAYA_PROFILE_SCOPE("optim.adamw");
      float* ev = v_.data() + state_offset_[idx];
#pragma omp parallel for schedule(static) if (e.numel > 16384)
      for (int64_t i = 0; i < e.numel; ++i) {
        const float gi = clip * g[i];
        if (zero) g[i] = 0.0f;
        em[i] = b1 * em[i] + (1 - b1) * gi;
        ev[i] = b2 * ev[i] + (1 - b2) * gi * gi;
        const float update = (em[i] / bc1) / (std::sqrt(ev[i] / bc2) + eps);
        w[i] = w[i] * decay - lr * update;
        if (w16 != nullptr) w16[i] = float_to_bf16(w[i]);
      }
    }
  }
}

}  // namespace zaya
