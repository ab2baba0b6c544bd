#include "zaya/ops/adapted_linear.h"

#include "zaya/core/error.h"
#include "zaya/ops/matmul.h"

namespace zaya {

namespace {

// The branch covers exactly the base product's output.
template <typename T>
void check_whole(const LoraBranch<T>& l, int64_t tokens, int64_t in, int64_t out) {
  const LoraShape& s = l.shape;
  ZAYA_ASSERT(!l.adapted() ||
              (l.row_offset == 0 && s.tokens == tokens && s.in == in && s.out == out && s.out_stride == out));
}

}  // namespace

template <typename T>
void lora_branch_forward(T* y, const T* x_TI, const LoraBranch<T>& l) {
  if (!l.adapted()) return;
  lora_forward<T>(y + l.row_offset, l.h_Tr, x_TI, l.a_rI, l.b_Or, l.shape, l.scratch);
}

template <typename T>
void lora_branch_backward(T* dx_TI, const T* dy, const T* x_TI, const LoraBranch<T>& l) {
  if (!l.adapted()) return;
  lora_backward<T>(dx_TI, l.da_rI, l.db_Or, dy + l.row_offset, x_TI, l.h_Tr, l.a_rI, l.b_Or, l.shape, l.scratch);
}

template <typename T>
void adapted_linear_forward(const Precision& precision, T* y_TO, const T* x_TI, const T* w_OI, int64_t tokens,
                            int64_t in, int64_t out, const LoraBranch<T>& l) {
  check_whole(l, tokens, in, out);
  linear_forward<T>(precision, y_TO, x_TI, w_OI, tokens, in, out);
  lora_branch_forward(y_TO, x_TI, l);
}

template <typename T>
void adapted_linear_backward(const Precision& precision, T* dx_TI, T* dw_OI, const T* dy_TO, const T* x_TI,
                             const T* w_OI, int64_t tokens, int64_t in, int64_t out, const LoraBranch<T>& l) {
  check_whole(l, tokens, in, out);
  linear_backward<T>(precision, dx_TI, dw_OI, dy_TO, x_TI, w_OI, tokens, in, out);
  lora_branch_backward(dx_TI, dy_TO, x_TI, l);
}

template void adapted_linear_forward<float>(const Precision&, float*, const float*, const float*, int64_t, int64_t,
                                            int64_t, const LoraBranch<float>&);
template void adapted_linear_forward<double>(const Precision&, double*, const double*, const double*, int64_t, int64_t,
                                             int64_t, const LoraBranch<double>&);
template void adapted_linear_backward<float>(const Precision&, float*, float*, const float*, const float*, const float*,
                                             int64_t, int64_t, int64_t, const LoraBranch<float>&);
template void adapted_linear_backward<double>(const Precision&, double*, double*, const double*, const double*,
                                              const double*, int64_t, int64_t, int64_t, const LoraBranch<double>&);
template void lora_branch_forward<float>(float*, const float*, const LoraBranch<float>&);
template void lora_branch_forward<double>(double*, const double*, const LoraBranch<double>&);
template void lora_branch_backward<float>(float*, const float*, const float*, const LoraBranch<float>&);
template void lora_branch_backward<double>(double*, const double*, const double*, const LoraBranch<double>&);

}  // namespace zaya
