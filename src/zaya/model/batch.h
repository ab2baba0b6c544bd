#pragma once
// The shape of one forward/backward call: B sequences of S tokens, T = B * S
// rows, token t of sequence b at position t (positions restart per sequence).

#include <cstdint>

#include "zaya/ops/rope.h"

namespace zaya {

struct BatchShape {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t tokens() const { return batch * seq; }
  const int32_t* pos_T = nullptr;  // position of each row
  const RopeTable* rope = nullptr;
};

}  // namespace zaya
