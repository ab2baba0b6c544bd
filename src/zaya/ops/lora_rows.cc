#include "zaya/ops/lora_rows.h"

#include <vector>

#include "zaya/core/error.h"
#include "zaya/ops/dot_widened.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {
namespace {

// Below this many multiply-adds a call runs on the calling thread (as the
// decoder's small products do, infer/linear.h kDecodeParallelMinMacs).
constexpr int64_t kParallelMinMacs = int64_t(1) << 17;

// One row: h = x A^T, then y += scale * h B^T, every sum in dot_widened's fixed order
// (an `omp simd` reduction's order could change with the row's alignment).
void lora_row(float* y, const float* x, const float* a_rI, const float* b_Or, const LoraRowsShape& s, float* h) {
  for (int64_t k = 0; k < s.rank; ++k) h[k] = dot_widened(a_rI + k * s.in, x, s.in);
  for (int64_t o = 0; o < s.out; ++o) y[o] += s.scale * dot_widened(b_Or + o * s.rank, h, s.rank);
}

}  // namespace

void lora_rows_forward(float* y, const float* x, std::span<const int32_t> rows, const float* a_rI, const float* b_Or,
                       const LoraRowsShape& s) {
  ZAYA_ASSERT(s.rank > 0 && s.in > 0 && s.out > 0 && s.ldx >= s.in && s.ldy >= s.out);
  const int64_t n = int64_t(rows.size());
  if (n == 0) return;
  // The work is the adapter floats each row reads (its multiply-adds); under
  // the decoder's threshold it counts as none, so the rows run serially.
  const int64_t macs = n * s.rank * (s.in + s.out);
  parallel_for(n, macs >= kParallelMinMacs ? macs : 0, [&](int64_t i) {
    // Each thread's h: grown once to the largest rank it meets, then reused.
    thread_local std::vector<float> h;
    if (int64_t(h.size()) < s.rank) h.resize(size_t(s.rank));
    const int64_t r = rows[size_t(i)];
    lora_row(y + r * s.ldy, x + r * s.ldx, a_rI, b_Or, s, h.data());
  });
}

}  // namespace zaya
