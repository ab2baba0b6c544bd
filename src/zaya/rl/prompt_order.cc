#include "zaya/rl/prompt_order.h"

#include <utility>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"

namespace zaya {

PromptOrder::PromptOrder(size_t prompts, uint64_t seed) : order_(prompts), seed_(seed), cursor_(prompts) {
  ZAYA_CHECK(prompts > 0, "internal error: no prompts to order");
}

void PromptOrder::shuffle(uint64_t epoch) {
  Rng rng{seed_, 0x524c, epoch};
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[size_t(rng.next_below(i))]);
}

size_t PromptOrder::next() {
  if (cursor_ == order_.size()) {
    shuffle(epochs_++);
    cursor_ = 0;
  }
  return order_[cursor_++];
}

void PromptOrder::set_state(uint64_t epochs, size_t position) {
  ZAYA_CHECK(position <= order_.size() && (epochs > 0 || position == order_.size()),
             "the checkpoint's prompt position (epoch {}, prompt {}) does not fit {} prompts; resume with the "
             "rl.prompts the run was started with",
             epochs, position, order_.size());
  epochs_ = epochs;
  cursor_ = position;
  if (epochs > 0) shuffle(epochs - 1);
}

}  // namespace zaya
