#pragma once
// y = x W^T for inference, choosing the kernel by the number of tokens:
//
//  * up to kMatvecMaxTokens rows (decode steps): the bandwidth-bound matvec
//    kernel (ops/matvec.h), f32 activations, bf16 or f32 weights read once;
//  * more rows (prefill, scoring): a GEMM. f32 weights go to oneDNN's sgemm.
//    bf16 weights go to oneDNN's bf16 matmul (AMX / AVX512-BF16), which rounds
//    the activations to bf16 as bf16 inference in PyTorch does; with
//    `bf16_activations` off they stay on the matvec kernel instead (f32
//    activations, exact, several times slower): the setting the decode-vs-
//    full-sequence tests use. int8 weights (Q8_0 blocks) always take the
//    int8 matvec kernel (ops/matvec_q8.h), on activations quantized once per
//    input: once for all the parts of run_parts. MXFP4 and FP8 weights
//    (quantized experts) take their matvec kernels up to kMatvecMaxTokens
//    rows (MXFP4: ops/matvec_mxfp4_q8.h over int8-quantized activations, or
//    ops/matvec_lowbit.h's float32 ones, mxfp4_int8_activations(); FP8:
//    ops/matvec_fp8_bf16.h over bf16-rounded activations, or
//    ops/matvec_lowbit.h's float32 ones, fp8_bf16_activations()) and beyond that an f32 GEMM over tiles of rows
//    dequantized exactly (gemm_lowbit_rows): prefill reads each weight once
//    per tile instead of once per token.
//
// The runner owns the scratch of the bf16 GEMM path (activations rounded to
// bf16, padded to a row bucket so that oneDNN builds few primitives).

#include <cstdint>
#include <span>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/infer/infer_model.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/ops/matvec_q8.h"

namespace zaya {

inline constexpr int64_t kMatvecMaxTokens = 16;

// A decode product smaller than this many multiply-adds (256 KB of bf16
// weights) runs on the calling thread: below it an OpenMP fork/join costs more
// than it saves. Measured side by side on a quiet machine (`small` preset,
// 2 threads, docs/inference.md): 1M -> 1.75 ms/token (only the LM head in
// parallel), 128K -> 1.15 ms/token (expert and attention projections too).
// On cores shared with other busy jobs every region can wait a scheduler tick
// for a descheduled worker; there `--threads 1` is faster.
inline constexpr int64_t kDecodeParallelMinMacs = int64_t(1) << 17;

class LinearRunner {
 public:
  // max_in / max_out: the widest matrix this runner will see.
  LinearRunner(int64_t max_in, int64_t max_out, bool bf16_activations);

  // y[T, O] (row stride ldy) (+)= x[T, I] (row stride ldx) W^T.
  void run(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens, const WeightMatrix& w,
           bool accumulate = false);

  // Several matrices over the same input, each writing the columns
  // [col, col + rows) of y: one parallel loop for all of them in decode.
  struct Part {
    const WeightMatrix* w;
    int64_t col;
  };
  void run_parts(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens, std::span<const Part> parts);

  // Independent products y[T, O] (row stride ldy) = x[T, I] (row stride ldx) W^T
  // (the experts of a decode step, the parts above): in decode, all their rows
  // cut in pieces of matvec_piece_rows (ops/matvec.h) and shared in one loop of
  // core/work_pool.h, so the step waits once for all of them; else (prefill,
  // int8 matrices over different inputs) one product after the other.
  struct Product {
    const WeightMatrix* w;
    const float* x;
    int64_t ldx;
    int64_t tokens;
    float* y;
    int64_t ldy;
  };
  void run_products(std::span<const Product> products);

  bool bf16_activations() const { return bf16_activations_; }
  // Products of up to this many rows take the matvec kernel (kMatvecMaxTokens; the
  // engine raises it for a speculative verification step: each row's bits as in decode).
  int64_t matvec_max_tokens() const { return matvec_max_tokens_; }
  void set_matvec_max_tokens(int64_t n) { matvec_max_tokens_ = n; }

 private:
  void gemm_bf16_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens, const WeightMatrix& w,
                      bool accumulate);
  // An MXFP4 or FP8 matrix's rows dequantized to f32, a tile at a time, each tile one sgemm.
  void gemm_lowbit_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t tokens, const WeightMatrix& w,
                        bool accumulate);
  int64_t max_in_, max_out_;
  bool bf16_activations_;
  int64_t matvec_max_tokens_ = kMatvecMaxTokens;
  int64_t chunk_rows_ = 0;          // rows per bf16 GEMM call
  AlignedPtr<uint16_t> xb_;         // [chunk_rows, max_in] activations in bf16
  AlignedPtr<float> cbuf_;          // [chunk_rows, max_out] GEMM output
  Bf16GemmCache gemms_;             // the bf16 GEMMs' primitives
  Q8Activations xq_;                // the input of run's int8-input products, quantized
  std::vector<Q8Activations> xqs_;  // run_products' distinct int8 inputs, quantized
  std::vector<int> xq_of_;          // per product: its entry of xqs_, or -1 (float input)
  std::vector<float> wtile_;        // gemm_lowbit_rows' dequantized rows
  struct Piece {
    int64_t product, r0, r1;
  };
  std::vector<Piece> pieces_;      // run_products' rows, reused
  std::vector<Product> products_;  // run_parts' products, reused
};

}  // namespace zaya
