#pragma once
// The shape of one forward/backward call: B sequences of S tokens, T = B * S
// rows, token t of sequence b at position pos_T[t] (t % S, or under context
// parallelism the positions of this rank's chunks, model/context_parallel.h).

#include <cstdint>

#include "zaya/ops/rope.h"

namespace zaya {

struct ContextParallel;

struct BatchShape {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t tokens() const { return batch * seq; }
  const int32_t* pos_T = nullptr;           // position of each row
  const RopeTable* rope = nullptr;          // full-attention blocks (model.rope_theta)
  const RopeTable* sliding_rope = nullptr;  // sliding-window blocks (model.sliding_rope_theta); null without any
  const ContextParallel* cp = nullptr;      // null: whole sequences on this rank
};

}  // namespace zaya
