#pragma once
// The order in which an RL run takes its prompts (docs/rl.md "The prompts"):
// epoch after epoch, each a Fisher-Yates shuffle seeded by (train.seed,
// epoch). Its state is two numbers (the epochs begun, the position in the
// current one), which an RL checkpoint holds (rl_checkpoint.h): a resumed run
// takes the same prompts as the uninterrupted one.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zaya {

class PromptOrder {
 public:
  PromptOrder(size_t prompts, uint64_t seed);
  // The next prompt's index (a new epoch starts when the current one is used up).
  size_t next();

  uint64_t epochs() const { return epochs_; }  // epochs begun (0: none yet)
  size_t position() const { return cursor_; }  // prompts taken of the current epoch
  // Fails naming the values when they do not fit `prompts` (a checkpoint of another prompt file).
  void set_state(uint64_t epochs, size_t position);

 private:
  void shuffle(uint64_t epoch);

  std::vector<size_t> order_;
  uint64_t seed_ = 0, epochs_ = 0;
  size_t cursor_ = 0;
};

}  // namespace zaya
