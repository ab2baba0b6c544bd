#include "zaya/optim/balance.h"

#include <cmath>

#include "zaya/core/error.h"

namespace zaya {

void BalanceConfig::validate(const std::string& source) const {
  ZAYA_CHECK(lr >= 0 && lr < 1, "{}: moe.balance_lr = {} is invalid; allowed: [0, 1)", source, lr);
  ZAYA_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
             "{}: moe.balance_beta1/beta2 = {}/{} are invalid; allowed: [0, 1)", source, beta1, beta2);
  ZAYA_CHECK(skip_target >= 0 && skip_target < 1, "{}: moe.skip_target = {} is invalid; allowed: [0, 1)", source,
             skip_target);
}

BalanceController::BalanceController(int64_t layers, int64_t experts, bool has_skip, const BalanceConfig& config)
    : layers_(layers),
      experts_(experts),
      slots_(experts + (has_skip ? 1 : 0)),
      has_skip_(has_skip),
      config_(config),
      m_(layers * slots_, 0.0),
      v_(layers * slots_, 0.0) {}

void BalanceController::update(const std::vector<std::vector<double>>& choices, const std::vector<float*>& biases) {
  if (!config_.enabled || config_.lr == 0) return;
  ZAYA_ASSERT(int64_t(choices.size()) == layers_ && int64_t(biases.size()) == layers_);
  ++step_;
  const double bc1 = 1 - std::pow(config_.beta1, double(step_));
  const double bc2 = 1 - std::pow(config_.beta2, double(step_));
  const bool steer_skip = has_skip_ && config_.skip_target > 0;
  for (int64_t l = 0; l < layers_; ++l) {
    double total = 0;
    for (int64_t s = 0; s < slots_; ++s) total += choices[l][s];
    if (total == 0) continue;
    for (int64_t s = 0; s < slots_; ++s) {
      const bool is_skip = has_skip_ && s == experts_;
      if (is_skip && !steer_skip) continue;
      const double target = is_skip ? config_.skip_target : (1.0 - config_.skip_target) / double(experts_);
      const double err = choices[l][s] / total - target;  // the "gradient" of the bias
      double& m = m_[l * slots_ + s];
      double& v = v_[l * slots_ + s];
      m = config_.beta1 * m + (1 - config_.beta1) * err;
      v = config_.beta2 * v + (1 - config_.beta2) * err * err;
      biases[l][s] -= float(config_.lr * (m / bc1) / (std::sqrt(v / bc2) + config_.eps));
    }
  }
}

}  // namespace zaya
