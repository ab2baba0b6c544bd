#pragma once
// Helpers for the inference tests (included by *_test.cc only): small random
// models whose every vector is perturbed away from its initial value (so
// residual scales, biases, temperatures and balancing biases all matter and
// some tokens take the skip expert), reference logits from the full-sequence
// forward pass, and logit comparisons.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/infer/engine.h"
#include "zaya/model/lora.h"
#include "zaya/model/model.h"
#include "zaya/model/params.h"

namespace zaya::testing {

// A model small enough for tests: 3 blocks, 4 experts + skip, 2 KV heads
// (group 2), padded vocabulary (300 real ids of 320 rows).
inline ZayaConfig small_test_config() {
  ZayaConfig c = preset_config("tiny");
  c.hidden = 64;
  c.num_blocks = 3;
  c.vocab_size = 320;
  c.real_vocab_size = 300;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.experts = 4;
  c.expert_ffn = 48;
  c.router_hidden = 32;
  c.max_position = 128;
  c.rope_theta = 10000;
  return c;
}

inline std::unique_ptr<ZayaModel> random_model(const ZayaConfig& c, uint64_t seed) {
  auto m = std::make_unique<ZayaModel>(c);
  m->init(seed);
  // Perturb every vector (norms, scales, biases, temperatures) and the
  // balancing biases; larger weights give the router clear decisions.
  for (const ParamEntry& e : m->params().entries()) {
    float* p = m->param_data() + e.offset;
    if (e.kind == ParamKind::kVector) {
      for (int64_t i = 0; i < e.numel; ++i) p[i] += 0.2f * normal01(seed, 1000 + e.offset, i);
    } else if (e.name.find("router_mlp") != std::string::npos) {
      for (int64_t i = 0; i < e.numel; ++i) p[i] *= 20.0f;
    }
  }
  for (float* b : m->balancing_biases())
    for (int64_t i = 0; i < c.router_slots(); ++i) b[i] = 0.05f * normal01(seed, 7, i);
  return m;
}

// Random token ids in [0, real_vocab).
inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = int32_t(philox4x32(seed, 3, i)[0] % uint32_t(vocab));
  return ids;
}

// [S, V] logits of one sequence from the training forward pass (the reference).
inline std::vector<float> reference_logits(const ZayaModel& model, const std::vector<int32_t>& ids) {
  const ZayaConfig& c = model.config();
  const int64_t S = int64_t(ids.size());
  ModelWorkspace ws(c, 1, S, false);
  model_forward(model, ws, ids.data(), nullptr, 1, S, {});
  return std::vector<float>(ws.logits(), ws.logits() + S * c.vocab_size);
}

// max |a - b| / max |b| over the real vocabulary of `rows` rows.
inline double logits_error(const float* a, const float* b, int64_t rows, int64_t vocab, int64_t real_vocab) {
  double diff = 0, scale = 1e-12;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v = 0; v < real_vocab; ++v) {
      diff = std::max(diff, double(std::fabs(a[r * vocab + v] - b[r * vocab + v])));
      scale = std::max(scale, double(std::fabs(b[r * vocab + v])));
    }
  return diff / scale;
}

// The logits of every row of the engine's last step that asked for them.
inline std::vector<float> step_logits(InferenceEngine& engine) {
  std::vector<float> out(engine.logit_rows() * engine.config().vocab_size);
  engine.logits(0, engine.logit_rows(), out.data());
  return out;
}

// A LoRA adapter of `rank` on `targets` as training leaves one: both of each
// target's matrices non-zero (PEFT's initialisation zeroes one of them).
inline std::unique_ptr<LoraAdapters> trained_adapter(const ZayaConfig& c, uint64_t seed,
                                                     const std::vector<LoraTarget>& targets, int64_t rank = 4) {
  LoraConfig l;
  l.enabled = true;
  l.rank = rank;
  l.alpha = 2.0 * double(rank);
  l.targets = targets;
  auto a = std::make_unique<LoraAdapters>(c, l);
  a->init(seed);
  for (const LoraAdapters::Entry& e : a->entries()) {
    const bool expert = lora_is_expert(e.target);
    float* p = a->data() + (expert ? e.a_offset : e.b_offset);
    const int64_t n = expert ? e.a_floats(l.rank) : e.b_floats(l.rank);
    for (int64_t i = 0; i < n; ++i) p[i] = 0.2f * normal01(seed, 7 + uint64_t(e.b_offset), uint64_t(i));
  }
  return a;
}

}  // namespace zaya::testing
