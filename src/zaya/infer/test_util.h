#pragma once
// Helpers for the inference tests (included by *_test.cc only): small random
// models whose every vector is perturbed away from its initial value (so
// residual scales, biases, temperatures and balancing biases all matter and
// some tokens take the skip expert), reference logits from the full-sequence
// forward pass, and logit comparisons.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/sampling.h"
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

// Whether two float vectors hold the same bits.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}

// Pearson's chi-square of `counts` (per id, n draws) against (probability, id)
// pairs; cells with expectation < 5 pooled. Sets `dof`; a drawn id outside the
// distribution fails the test.
template <typename P>
double chi_square(const std::map<int32_t, int64_t>& counts, const std::vector<std::pair<P, int32_t>>& p, int64_t n,
                  int64_t& dof) {
  double chi = 0, pooled_e = 0, pooled_o = 0;
  int64_t cells = 0, seen = 0;
  for (const auto& [prob, id] : p) {
    const double e = double(prob) * double(n);
    const auto it = counts.find(id);
    const double o = it == counts.end() ? 0 : double(it->second);
    seen += int64_t(o);
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    chi += (o - e) * (o - e) / e;
    ++cells;
  }
  EXPECT_EQ(seen, n) << "a token outside the distribution was drawn";
  if (pooled_e > 0) {
    chi += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
    ++cells;
  }
  dof = cells - 1;
  return chi;
}

// The 0.999 quantile of chi-square with k degrees of freedom (Wilson-Hilferty).
inline double chi_square_999(int64_t k) {
  const double z = 3.0902, a = 2.0 / (9.0 * double(k));
  return double(k) * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Prompts that repeat a random motif (so that n-gram drafts exist) or not,
// several lengths and token limits; greedy.
inline std::vector<GenerationRequest> repetitive_requests(const ZayaConfig& c, int64_t n, uint64_t seed) {
  std::vector<GenerationRequest> reqs;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t> motif = random_tokens(2 + i % 4, c.real_vocab_size, seed + uint64_t(i));
    GenerationRequest r;
    for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), motif.begin(), motif.end());
    r.prompt.resize(std::min<size_t>(r.prompt.size(), 15));
    r.max_new_tokens = 18 + 5 * (i % 3);
    r.sampling.temperature = 0;
    reqs.push_back(r);
  }
  return reqs;
}

// Greedy speculative generation of `reqs` with `spec` at K = 1, 3 and 6,
// adaptive or fixed, equals `want` (their plain greedy generation under
// `plain`) token for token, with the same finish reasons; the drafts are added
// to `seen`. `what` names the case in failures.
inline void expect_speculative_greedy_equals(const InferModel& im, const std::vector<GenerationRequest>& reqs,
                                             const GeneratorOptions& plain, const SpecOptions& spec,
                                             const std::vector<GenerationResult>& want, SpecCounts& seen,
                                             const std::string& what) {
  for (int64_t k : {1, 3, 6})
    for (bool adaptive : {true, false}) {
      GeneratorOptions o = plain;
      o.spec = spec;
      o.spec.tokens = k;
      o.spec.adaptive = adaptive;
      GenerationStats st;
      const std::vector<GenerationResult> got = generate(im, reqs, o, {}, {}, &st);
      for (size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << what << " K " << k << " adaptive " << adaptive << " request " << i;
        EXPECT_EQ(got[i].finish, want[i].finish);
      }
      EXPECT_GT(st.spec.drafts, 0) << what;
      seen.add(st.spec);
    }
}

// Speculative sampling on a model (statistical test): N requests sample three
// tokens after `prompt` over ids 0..vocab-1 under `so` (seeds 0..N-1) with
// `options` (its sample_vocab is set to vocab); the joint frequencies of the
// 27 (vocab^3) sequences must pass a chi-square test (p = 0.001) against the
// model's own p(t1) p(t2 | t1) p(t3 | t1 t2) from plain one-token steps.
// Returns the run's statistics.
inline GenerationStats expect_three_tokens_follow_the_model(const InferModel& im, GeneratorOptions options,
                                                            const std::vector<int32_t>& prompt,
                                                            const SamplingOptions& so, int64_t vocab, int64_t n) {
  std::vector<GenerationRequest> reqs(n);
  for (int64_t i = 0; i < n; ++i) {
    reqs[i].prompt = prompt;
    reqs[i].max_new_tokens = 3;
    reqs[i].sampling = so;
    reqs[i].sampling.seed = uint64_t(i);
  }
  options.sample_vocab = vocab;
  GenerationStats st;
  const std::vector<GenerationResult> out = generate(im, reqs, options, {}, {}, &st);
  EngineOptions eo;
  eo.max_context = int64_t(prompt.size()) + 3;
  InferenceEngine e(im, eo);
  auto dist = [&](const std::vector<int32_t>& ids) {
    e.reset(0);
    StepChunk ch{0, ids.data(), int64_t(ids.size()), LogitsWanted::kLast};
    e.step({&ch, 1});
    std::vector<float> l = step_logits(e);
    std::vector<std::pair<float, int32_t>> p;
    sampling_distribution(l.data(), vocab, so, p);
    std::vector<double> q(vocab, 0);
    for (const auto& [pr, id] : p) q[id] = pr;
    return q;
  };
  std::vector<std::pair<double, int32_t>> expect;
  const std::vector<double> p1 = dist(prompt);
  for (int32_t a = 0; a < vocab; ++a) {
    std::vector<int32_t> pa = prompt;
    pa.push_back(a);
    const std::vector<double> p2 = dist(pa);
    for (int32_t b = 0; b < vocab; ++b) {
      std::vector<int32_t> pb = pa;
      pb.push_back(b);
      const std::vector<double> p3 = dist(pb);
      for (int32_t d = 0; d < vocab; ++d)
        expect.push_back({p1[a] * p2[b] * p3[d], int32_t((a * vocab + b) * vocab + d)});
    }
  }
  std::map<int32_t, int64_t> counts;
  for (const GenerationResult& r : out) {
    EXPECT_EQ(r.tokens.size(), 3u);
    if (r.tokens.size() == 3) ++counts[int32_t((r.tokens[0] * vocab + r.tokens[1]) * vocab + r.tokens[2])];
  }
  int64_t dof = 0;
  const double chi = chi_square(counts, expect, n, dof);
  EXPECT_LT(chi, chi_square_999(dof)) << "dof " << dof;
  return st;
}

}  // namespace zaya::testing
