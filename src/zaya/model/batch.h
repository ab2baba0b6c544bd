#pragma once
// The shape of one forward/backward call: B sequences of S tokens, T = B * S
// rows, token t of sequence b at position pos_T[t] (t % S, or under context
// parallelism the positions of this rank's chunks, model/context_parallel.h).
//
// Document masking (data.document_masking, docs/training.md): doc_pos_T[t] is
// row t's position inside its document (0 at a document start), so its
// document began at position pos_T[t] - doc_pos_T[t]. Attention, the CCA
// convolutions and the delayed value stream then see nothing before that,
// and RoPE rotates by doc_pos_T (positions restart at every document, as
// Megatron's reset_position_ids), so a packed window computes exactly what
// each document alone would. Null: no masking (one document per sequence).

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
  const int32_t* doc_pos_T = nullptr;       // document masking: each row's position in its document (null: off)
  // The positions RoPE rotates by: inside the document under masking.
  const int32_t* rope_pos_T() const { return doc_pos_T != nullptr ? doc_pos_T : pos_T; }
};

}  // namespace zaya
