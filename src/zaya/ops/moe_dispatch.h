#pragma once
// Token permutation for the experts (spec §4): tokens are grouped by expert
// with a stable counting sort, so each expert runs one GEMM over its rows
// ("grouped per-expert GEMMs", no per-token loops), and the results are
// combined back with their gates.

#include <cstdint>
#include <vector>

namespace zaya {

// Where each (token, choice) went. Capacity is fixed at construction, so
// building a plan inside the step loop allocates nothing.
struct ExpertPlan {
  int64_t experts = 0;
  int64_t rows = 0;                 // routed rows in use (choices that hit a real expert)
  std::vector<int64_t> offsets;     // [E + 1]: rows of expert e are offsets[e] .. offsets[e+1]-1
  std::vector<int32_t> row_token;   // [capacity]: token of each permuted row
  std::vector<int32_t> choice_row;  // [tokens * top_k]: permuted row of each choice, -1 if not an expert

  void reserve(int64_t num_experts, int64_t max_tokens, int64_t top_k);
  int64_t count(int64_t e) const { return offsets[e + 1] - offsets[e]; }
};

// choice_TJ entries in [0, experts) are experts; anything else (skip, void) is not routed.
void build_expert_plan(ExpertPlan& plan, const int32_t* choice_TJ, int64_t tokens, int64_t top_k);

// xp_MD[r] = x_TD[row_token[r]] for the plan's rows.
template <typename T>
void gather_rows(T* xp_MD, const T* x_TD, const ExpertPlan& plan, int64_t dim);

// out_TD[t] = sum_k gate[t,k] * (expert choice ? y_MD[row] : skip choice ? x_TD[t] : 0)
template <typename T>
void combine_forward(T* out_TD, const T* y_MD, const T* x_TD, const T* gate_TJ, const int32_t* choice_TJ,
                     const ExpertPlan& plan, int64_t tokens, int64_t top_k, int64_t dim, int64_t skip_slot);

// Backward of combine_forward. Writes dy_MD (= gate * dout) for every routed
// row, adds into dgate_TJ and, for skip choices, into dx_TD.
template <typename T>
void combine_backward(T* dy_MD, T* dgate_TJ, T* dx_TD, const T* dout_TD, const T* y_MD, const T* x_TD, const T* gate_TJ,
                      const int32_t* choice_TJ, const ExpertPlan& plan, int64_t tokens, int64_t top_k, int64_t dim,
                      int64_t skip_slot);

// dx_TD[t] += sum of dxp_MD over the rows of token t, in choice order.
template <typename T>
void scatter_add_rows(T* dx_TD, const T* dxp_MD, const ExpertPlan& plan, int64_t tokens, int64_t top_k, int64_t dim);

}  // namespace zaya
