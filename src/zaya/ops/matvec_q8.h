#pragma once
// Products of int8 weights in Q8_0 blocks (core/q8_0.h) with activations
// quantized to int8 the same way, as ggml's Q8_0 x Q8_0 dot product does
// (docs/inference.md, "int8 = Q8_0"): each activation row is cut into blocks
// of 32 values, each block stored as 32 int8 q and an f32 scale d
// (d = max|x| / 127, q = round-to-nearest-even(x * (1 / d))), and
//
//   y[t, r] = sum over blocks b of  dw[r, b] * dx[t, b] * (sum_i qw[r, 32b + i] * qx[t, 32b + i]),
//
// the inner sum an exact integer. Decode then costs integer multiply-adds
// (AVX512-VNNI's vpdpbusd: 64 int8 products per instruction) and one float
// multiply-add per block and token, instead of widening each weight to f32.
// The activation rounding adds an error of at most dx / 2 per activation, of
// the same size as the weights' own (docs/performance.md measures perplexity).
//
// The activations are quantized once per product (or once for several
// products over the same input, LinearRunner::run_parts) into a Q8Activations,
// which any number of threads then read. The kernel is chosen at run time:
// VNNI where the CPU has AVX512-VNNI, else AVX2 (vpmaddubsw) where it has
// AVX2, a portable loop otherwise; all compute the formula above (the integer
// sums exactly), differing only in the order of the float additions over blocks.

#include <cstdint>
#include <vector>

namespace zaya {

// Two consecutive blocks of one activation row, laid out for vpdpbusd.
struct alignas(64) Q8ActivationPair {
  int8_t q[64];      // the two blocks' int8 values
  int32_t corr[16];  // -128 * (q[4l] + q[4l + 1] + q[4l + 2] + q[4l + 3]) for lane l (see matvec_q8.cc)
  float d[16];       // lanes 0-7: the first block's scale, 8-15: the second's
};

// `tokens` activation rows of `in` values (a multiple of 32), quantized. A
// block holding a NaN or an infinity gets the scale NaN (and q = 0), so the
// outputs that read it are NaN, as the float product's would be; a block
// whose scale is below FLT_MIN quantizes to zeros.
class Q8Activations {
 public:
  // x_TI: row t at x_TI + t * ldx. Reuses its storage: no allocation once it
  // has held `tokens` x `in` values. portable: the scalar quantizer whatever
  // the CPU (tests compare it with the vector one).
  void quantize(const float* x_TI, int64_t ldx, int64_t tokens, int64_t in, bool portable = false);

  int64_t tokens() const { return tokens_; }
  int64_t in() const { return in_; }
  int64_t pairs() const { return (in_ / 32 + 1) / 2; }  // the last pair's second block is zeros when in / 32 is odd
  const Q8ActivationPair* row(int64_t t) const { return data_.data() + t * pairs(); }
  int8_t value(int64_t t, int64_t i) const { return row(t)[i / 64].q[i % 64]; }
  float scale(int64_t t, int64_t block) const { return row(t)[block / 2].d[block % 2 * 8]; }

 private:
  std::vector<Q8ActivationPair> data_;
  int64_t tokens_ = 0, in_ = 0;
};

// One block the scalar way: the definition the vector quantizer must equal bit for bit.
void quantize_activation_block(const float* x, int8_t* q, float* d);

// Rows [row_begin, row_end) of y_TO (+)= xq W^T on the calling thread; W: rows
// of q8_0_row_bytes(xq.in()) bytes. y row stride ldy; accumulate: y += instead of y =.
void matvec_q8_rows(const uint8_t* w, int64_t row_begin, int64_t row_end, const Q8Activations& xq, float* y,
                    int64_t ldy, bool accumulate);
// All `out` rows, split over the OpenMP threads when worth a parallel region.
void matvec_q8(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy, bool accumulate);

// The AVX2 kernel (what CPUs with AVX2 but not AVX512-VNNI run), for tests on
// any CPU that has AVX2, FMA and F16C (matvec_q8_has_avx2).
bool matvec_q8_has_avx2();
void matvec_q8_rows_avx2(const uint8_t* w, int64_t row_begin, int64_t row_end, const Q8Activations& xq, float* y,
                         int64_t ldy, bool accumulate);
// The portable loop, whatever the CPU (tests compare the kernels).
void matvec_q8_rows_portable(const uint8_t* w, int64_t row_begin, int64_t row_end, const Q8Activations& xq, float* y,
                             int64_t ldy, bool accumulate);
// The formula above with double accumulation, for tests.
void matvec_q8_reference(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy,
                         bool accumulate);
// "vnni", "avx2" or "portable": the kernel matvec_q8_rows runs on this CPU.
const char* matvec_q8_kernel_name();

}  // namespace zaya
