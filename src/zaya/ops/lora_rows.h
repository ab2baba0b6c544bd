#pragma once
// The LoRA branch of the cached decoder, row by row (docs/serve.md
// "Adapters"): for each listed row r of a step,
//
//   y[r] += scale * (x[r] A_rI^T) B_Or^T
//
// the same maths as ops/lora_linear.h's lora_forward without dropout, but each
// row's sums run in a fixed order that does not depend on the other rows of
// the call. So a sequence gets the same bits whether its rows go alone or in a
// batch whose other rows carry other adapters (or none): the engine groups a
// step's rows by adapter and calls this once per adapter and matrix over that
// adapter's rows, after the base product ran once over every row.

#include <cstdint>
#include <span>

namespace zaya {

struct LoraRowsShape {
  int64_t in = 0;    // columns of x read (A's width)
  int64_t out = 0;   // columns of y written (B's height)
  int64_t rank = 0;  // A's rows, B's columns
  int64_t ldx = 0;   // row strides of x and y (y's row r starts at y + r * ldy)
  int64_t ldy = 0;
  float scale = 1;  // alpha / rank
};

// y[r, 0..out) += scale * (x[r, 0..in) A^T) B^T for every r in `rows`
// (indices of rows of x and y). A [rank, in], B [out, rank], row-major.
// Runs the rows in parallel when the work is worth an OpenMP region.
void lora_rows_forward(float* y, const float* x, std::span<const int32_t> rows, const float* a_rI, const float* b_Or,
                       const LoraRowsShape& shape);

}  // namespace zaya
