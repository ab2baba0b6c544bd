#include "zaya/ops/lora_linear.h"

#include "zaya/core/rng.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {

namespace {

// xd_TI = drop(x_TI) (inverted dropout from the Philox mask).
template <typename T>
void drop_input(T* xd_TI, const T* x_TI, const LoraShape& s) {
  const T keep_scale = T(1.0 / (1.0 - s.dropout));
  const float p = float(s.dropout);
  parallel_for(s.tokens, 2 * s.tokens * s.in, [&](int64_t t) {
    for (int64_t i = 0; i < s.in; ++i) {
      const int64_t at = t * s.in + i;
      xd_TI[at] = uniform01(s.seed, s.stream, uint64_t(at)) >= p ? x_TI[at] * keep_scale : T(0);
    }
  });
}

}  // namespace

int64_t lora_forward_scratch_floats(const LoraShape& s) { return s.dropout > 0 ? s.tokens * s.in : 0; }

int64_t lora_backward_scratch_floats(const LoraShape& s) { return lora_forward_scratch_floats(s) + s.tokens * s.rank; }

template <typename T>
void lora_forward(T* y_TO, T* h_Tr, const T* x_TI, const T* a_rI, const T* b_Or, const LoraShape& s, T* scratch) {
  const T* xd = x_TI;
  if (s.dropout > 0) {
    drop_input(scratch, x_TI, s);
    xd = scratch;
  }
  // h = xd A^T, then y += scale * h B^T.
  gemm<T>(false, true, s.tokens, s.rank, s.in, T(1), xd, s.in, a_rI, s.in, T(0), h_Tr, s.rank);
  gemm<T>(false, true, s.tokens, s.out, s.rank, T(s.scale), h_Tr, s.rank, b_Or, s.rank, T(1), y_TO, s.out_stride);
}

template <typename T>
void lora_backward(T* dx_TI, T* da_rI, T* db_Or, const T* dy_TO, const T* x_TI, const T* h_Tr, const T* a_rI,
                   const T* b_Or, const LoraShape& s, T* scratch) {
  T* dh_Tr = scratch;
  // dB += scale * dy^T h;  dh = scale * dy B.
  gemm<T>(true, false, s.out, s.rank, s.tokens, T(s.scale), dy_TO, s.out_stride, h_Tr, s.rank, T(1), db_Or, s.rank);
  gemm<T>(false, false, s.tokens, s.rank, s.out, T(s.scale), dy_TO, s.out_stride, b_Or, s.rank, T(0), dh_Tr, s.rank);
  const T* xd = x_TI;
  if (s.dropout > 0) {
    T* xd_TI = scratch + s.tokens * s.rank;
    drop_input(xd_TI, x_TI, s);
    xd = xd_TI;
  }
  // dA += dh^T xd.
  gemm<T>(true, false, s.rank, s.in, s.tokens, T(1), dh_Tr, s.rank, xd, s.in, T(1), da_rI, s.in);
  if (dx_TI == nullptr) return;
  if (s.dropout <= 0) {
    gemm<T>(false, false, s.tokens, s.in, s.rank, T(1), dh_Tr, s.rank, a_rI, s.in, T(1), dx_TI, s.in);
    return;
  }
  // dx += (dh A) * mask / (1 - p): the mask is where xd kept x.
  const T keep_scale = T(1.0 / (1.0 - s.dropout));
  const float p = float(s.dropout);
  parallel_for(s.tokens, 2 * s.tokens * s.in, [&](int64_t t) {
    for (int64_t i = 0; i < s.in; ++i) {
      const int64_t at = t * s.in + i;
      if (uniform01(s.seed, s.stream, uint64_t(at)) < p) continue;
      T sum = 0;
      for (int64_t k = 0; k < s.rank; ++k) sum += dh_Tr[t * s.rank + k] * a_rI[k * s.in + i];
      dx_TI[at] += sum * keep_scale;
    }
  });
}

template <typename T>
void lora_merge(T* w_OI, const T* a_rI, const T* b_Or, int64_t in, int64_t out, int64_t rank, double scale) {
  gemm<T>(false, false, out, in, rank, T(scale), b_Or, rank, a_rI, in, T(1), w_OI, in);
}

template void lora_forward<float>(float*, float*, const float*, const float*, const float*, const LoraShape&, float*);
template void lora_forward<double>(double*, double*, const double*, const double*, const double*, const LoraShape&,
                                   double*);
template void lora_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                   const float*, const LoraShape&, float*);
template void lora_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                    const double*, const double*, const LoraShape&, double*);
template void lora_merge<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, double);
template void lora_merge<double>(double*, const double*, const double*, int64_t, int64_t, int64_t, double);

}  // namespace zaya
