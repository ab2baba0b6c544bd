#pragma once
// The small model the model-layer tests share: 3 blocks, 4 query heads in 2
// KV groups, 4 experts + skip, a padded vocabulary (90 real ids of 96 rows).

#include "zaya/model/config.h"

namespace zaya::testing {

inline ZayaConfig model_test_config() {
  ZayaConfig c;
  c.hidden = 32;
  c.num_blocks = 3;
  c.vocab_size = 96;
  c.real_vocab_size = 90;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 8;
  c.rope_theta = 10000;
  c.max_position = 64;
  c.experts = 4;
  c.expert_ffn = 12;
  c.router_hidden = 16;
  return c;
}

}  // namespace zaya::testing
