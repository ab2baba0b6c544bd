#include "zaya/ops/moe_dispatch.h"

#include <algorithm>

#include "zaya/core/error.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {

void ExpertPlan::reserve(int64_t num_experts, int64_t max_tokens, int64_t top_k) {
  experts = num_experts;
  offsets.assign(num_experts + 1, 0);
  row_token.assign(max_tokens * top_k, 0);
  choice_row.assign(max_tokens * top_k, -1);
}

void build_expert_plan(ExpertPlan& plan, const int32_t* choice_TJ, int64_t tokens, int64_t top_k) {
  const int64_t n = tokens * top_k, E = plan.experts;
  ZAYA_ASSERT(int64_t(plan.choice_row.size()) >= n);
  std::fill(plan.offsets.begin(), plan.offsets.end(), 0);
  for (int64_t i = 0; i < n; ++i)
    if (choice_TJ[i] >= 0 && choice_TJ[i] < E) ++plan.offsets[choice_TJ[i] + 1];
  for (int64_t e = 0; e < E; ++e) plan.offsets[e + 1] += plan.offsets[e];
  plan.rows = plan.offsets[E];
  // Stable placement: rows of one expert keep token order.
  std::vector<int64_t>& cursor = plan.offsets;  // reuse: shift back afterwards
  for (int64_t i = 0; i < n; ++i) {
    int32_t e = choice_TJ[i];
    if (e >= 0 && e < E) {
      int64_t r = cursor[e]++;
      plan.row_token[r] = int32_t(i / top_k);
      plan.choice_row[i] = int32_t(r);
    } else {
      plan.choice_row[i] = -1;
    }
  }
  // cursor[e] now equals the old offsets[e+1]; restore the offsets.
  for (int64_t e = E; e > 0; --e) plan.offsets[e] = plan.offsets[e - 1];
  plan.offsets[0] = 0;
}

template <typename T>
void gather_rows(T* xp, const T* x, const ExpertPlan& plan, int64_t dim) {
  parallel_for(plan.rows, 2 * plan.rows * dim, [&](int64_t r) {
    std::copy(x + plan.row_token[r] * dim, x + (plan.row_token[r] + 1) * dim, xp + r * dim);
  });
}

template <typename T>
void combine_forward(T* out, const T* y, const T* x, const T* gate, const int32_t* choice, const ExpertPlan& plan,
                     int64_t tokens, int64_t top_k, int64_t dim, int64_t skip_slot) {
  parallel_for(tokens, tokens * dim * (top_k + 1), [&](int64_t t) {
    T* o = out + t * dim;
    std::fill(o, o + dim, T(0));
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t i = t * top_k + k;
      const T* src = nullptr;
      if (plan.choice_row[i] >= 0)
        src = y + int64_t(plan.choice_row[i]) * dim;
      else if (choice[i] == skip_slot && skip_slot >= 0)
        src = x + t * dim;
      if (src == nullptr) continue;
      const T w = gate[i];
#pragma omp simd
      for (int64_t c = 0; c < dim; ++c) o[c] += w * src[c];
    }
  });
}

template <typename T>
void combine_backward(T* dy, T* dgate, T* dx, const T* dout, const T* y, const T* x, const T* gate,
                      const int32_t* choice, const ExpertPlan& plan, int64_t tokens, int64_t top_k, int64_t dim,
                      int64_t skip_slot) {
  parallel_for(tokens, tokens * dim * (top_k + 1), [&](int64_t t) {
    const T* g = dout + t * dim;
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t i = t * top_k + k;
      const T w = gate[i];
      if (plan.choice_row[i] >= 0) {
        const int64_t r = plan.choice_row[i];
        const T* yr = y + r * dim;
        T* dyr = dy + r * dim;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < dim; ++c) {
          dyr[c] = w * g[c];
          dot += yr[c] * g[c];
        }
        dgate[i] += dot;
      } else if (choice[i] == skip_slot && skip_slot >= 0) {
        const T* xt = x + t * dim;
        T* dxt = dx + t * dim;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < dim; ++c) {
          dxt[c] += w * g[c];
          dot += xt[c] * g[c];
        }
        dgate[i] += dot;
      }
    }
  });
}

template <typename T>
void scatter_add_rows(T* dx, const T* dxp, const ExpertPlan& plan, int64_t tokens, int64_t top_k, int64_t dim) {
  parallel_for(tokens, tokens * dim * (top_k + 1), [&](int64_t t) {
    T* d = dx + t * dim;
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t r = plan.choice_row[t * top_k + k];
      if (r < 0) continue;
      const T* s = dxp + r * dim;
#pragma omp simd
      for (int64_t c = 0; c < dim; ++c) d[c] += s[c];
    }
  });
}

#define ZAYA_INSTANTIATE(T)                                                                                      \
  template void gather_rows<T>(T*, const T*, const ExpertPlan&, int64_t);                                        \
  template void combine_forward<T>(T*, const T*, const T*, const T*, const int32_t*, const ExpertPlan&, int64_t, \
                                   int64_t, int64_t, int64_t);                                                   \
  template void combine_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const int32_t*,          \
                                    const ExpertPlan&, int64_t, int64_t, int64_t, int64_t);                      \
  template void scatter_add_rows<T>(T*, const T*, const ExpertPlan&, int64_t, int64_t, int64_t);
ZAYA_INSTANTIATE(float)
ZAYA_INSTANTIATE(double)
#undef ZAYA_INSTANTIATE

}  // namespace zaya
