#pragma once
// The balancing-bias controller of ZAYA1 (docs/systems-notes.md §6.4, spec §10): per MoE
// layer, the error e_i = (share of the global batch's choices that went to
// slot i) - target_i is fed as a gradient to an AdamW-style update of the
// selection biases, so over-used experts are pushed down and under-used ones
// up. The biases only select (router_select); they never weight an output.
//
// Targets: each real expert (1 - skip_target) / E. With skip_target = 0 (the
// default) this is exactly the paper's "1/E" and the skip slot is left alone
// (its bias keeps its -1 init); with skip_target > 0 the skip slot is steered
// to that share of the tokens too.

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct BalanceConfig {
  bool enabled = true;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double skip_target = 0.0;
  void validate(const std::string& source) const;
};

class BalanceController {
 public:
  BalanceController(int64_t layers, int64_t experts, bool has_skip, const BalanceConfig& config);

  // One update from the choice counts of a whole (global) batch, choices_LN[l][slot].
  // biases[l] points at the N = E (+1 skip) biases of MoE layer l.
  void update(const std::vector<std::vector<double>>& choices_LN, const std::vector<float*>& biases);

  // State for checkpoints: step and the moments, [layers * slots] each.
  int64_t step() const { return step_; }
  std::vector<double>& first_moment() { return m_; }
  std::vector<double>& second_moment() { return v_; }
  void set_step(int64_t s) { step_ = s; }

 private:
  int64_t layers_, experts_, slots_;
  bool has_skip_;
  BalanceConfig config_;
  int64_t step_ = 0;
  std::vector<double> m_, v_;
};

}  // namespace zaya
