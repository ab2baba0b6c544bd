#include "zaya/infer/benchmark.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/spec_model.h"

namespace zaya {
namespace {

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed, uint64_t stream) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = int32_t(philox4x32(seed, stream, i)[0] % uint32_t(vocab));
  return ids;
}

PrefillPoint bench_prefill(const InferModel& model, const InferBenchOptions& o, int64_t S) {
  const ZayaConfig& c = model.config();
  EngineOptions eo;
  eo.max_sequences = 1;
  eo.max_context = S;
  eo.max_step_tokens = std::min(S, o.step_tokens);
  eo.bf16_activations = o.bf16_activations;
  InferenceEngine engine(model, eo);
  const std::vector<int32_t> ids = random_ids(S, c.real_vocab_size, o.seed, 1);
  std::vector<float> logits(c.vocab_size);
  auto run = [&] {
    engine.reset(0);
    for (int64_t t = 0; t < S; t += eo.max_step_tokens) {
      const int64_t n = std::min(eo.max_step_tokens, S - t);
      StepChunk ch{0, ids.data() + t, n, t + n == S ? LogitsWanted::kLast : LogitsWanted::kNone};
      engine.step({&ch, 1});
    }
    engine.logits(0, 1, logits.data());
  };
  run();  // warm-up: page faults, oneDNN primitives
  PrefillPoint p;
  p.tokens = S;
  p.seconds = 1e30;
  for (int64_t r = 0; r < std::max<int64_t>(1, o.prefill_reps); ++r) {
    const double t0 = now_seconds();
    run();
    p.seconds = std::min(p.seconds, now_seconds() - t0);
  }
  p.tokens_per_second = double(S) / p.seconds;
  return p;
}

// Mean ms of a speculative verification step: every sequence checks K drafted
// tokens after its last one (random ids: the cost does not depend on them), then
// keeps the first (a rejected draft), so the context grows as decode's does.
double bench_verify(const InferModel& model, const InferBenchOptions& o, int64_t B, int64_t L) {
  const ZayaConfig& c = model.config();
  const int64_t steps = std::max<int64_t>(1, o.decode_steps), warm = std::max<int64_t>(0, o.warmup_steps);
  const int64_t n = 1 + o.spec_tokens;
  EngineOptions eo;
  eo.max_sequences = B;
  eo.max_context = L + steps + warm + o.spec_tokens;
  eo.max_step_tokens = B * n;
  eo.bf16_activations = o.bf16_activations;
  InferenceEngine engine(model, eo);
  for (int32_t s = 0; s < B; ++s) engine.fill_synthetic(s, L, o.seed + uint64_t(s));
  const std::vector<int32_t> ids = random_ids(B * n * (steps + warm), c.real_vocab_size, o.seed, 3);
  std::vector<float> logits(B * n * c.vocab_size);
  std::vector<StepChunk> chunks(B);
  double total = 0;
  for (int64_t i = 0; i < warm + steps; ++i) {
    for (int32_t s = 0; s < B; ++s) chunks[s] = {s, ids.data() + (i * B + s) * n, n, LogitsWanted::kAll, true};
    const double t0 = now_seconds();
    engine.step(chunks);
    engine.logits(0, B * n, logits.data());
    for (int32_t s = 0; s < B; ++s) engine.keep_draft(s, engine.length(s) - n + 1);
    if (i >= warm) total += now_seconds() - t0;
  }
  return 1e3 * total / double(steps);
}

// Mean ms of a draft model drafting K tokens for each of B sequences of
// context L (random ids): each round follows a fully accepted draft (the
// context grows by the K drafted tokens and the target's next one), so the
// catch-up feeds K + 1 tokens, the most it does; greedy drafts (no draws).
// -1 when the contexts outgrow the draft model's positions.
double bench_draft(const InferModel& model, const InferBenchOptions& o, int64_t B, int64_t L) {
  const InferModel& draft = *o.draft_model;
  const int64_t steps = std::max<int64_t>(1, o.decode_steps), warm = std::max<int64_t>(0, o.warmup_steps);
  const int64_t K = o.spec_tokens, start = std::max<int64_t>(1, L);
  const int64_t context = start + (warm + steps) * (K + 1) + K;
  if (context > std::min(model.config().max_position, draft.config().max_position)) return -1;
  const int64_t vocab = std::min(model.config().real_vocab_size, draft.config().real_vocab_size);
  EngineOptions eo;  // the target's geometry (the drafter's slots, context and step budget)
  eo.max_sequences = B;
  eo.max_context = context;
  eo.max_step_tokens = B * (K + 1);
  eo.bf16_activations = o.bf16_activations;
  InferenceEngine target(model, eo);
  ModelDrafter drafter(draft, target, vocab);
  std::vector<std::vector<int32_t>> ctx(B), tokens(B);
  std::vector<std::vector<float>> q(B);
  std::vector<Rng> rngs(B);
  std::vector<DraftJob> jobs(B);
  const SamplingOptions greedy{.temperature = 0};
  for (int32_t s = 0; s < B; ++s) ctx[s] = random_ids(start, vocab, o.seed + uint64_t(s), 4);
  auto round = [&] {
    for (int32_t s = 0; s < B; ++s) jobs[s] = {s, ctx[s], K, &greedy, &rngs[s], &tokens[s], &q[s]};
    drafter.draft(jobs);
  };
  round();  // the prompts' prefill, untimed
  double total = 0;
  for (int64_t i = 0; i < warm + steps; ++i) {
    for (int32_t s = 0; s < B; ++s) {
      ctx[s].insert(ctx[s].end(), tokens[s].begin(), tokens[s].end());
      ctx[s].push_back(int32_t((ctx[s].back() + 1) % vocab));
    }
    const double t0 = now_seconds();
    round();
    if (i >= warm) total += now_seconds() - t0;
  }
  return 1e3 * total / double(steps);
}

DecodePoint bench_decode(const InferModel& model, const InferBenchOptions& o, int64_t B, int64_t L, double dram_gbps,
                         const BandwidthProbe& bandwidth) {
  const ZayaConfig& c = model.config();
  const WeightBytes& wb = model.weight_bytes();
  const int64_t steps = std::max<int64_t>(1, o.decode_steps), warm = std::max<int64_t>(0, o.warmup_steps);
  EngineOptions eo;
  eo.max_sequences = B;
  eo.max_context = L + steps + warm;
  eo.max_step_tokens = B;
  eo.bf16_activations = o.bf16_activations;
  InferenceEngine engine(model, eo);
  for (int32_t s = 0; s < B; ++s) engine.fill_synthetic(s, L, o.seed + uint64_t(s));
  const std::vector<int32_t> ids = random_ids(B * (steps + warm), c.real_vocab_size, o.seed, 2);
  std::vector<float> logits(B * c.vocab_size);
  std::vector<StepChunk> chunks(B);
  DecodePoint p;
  p.batch = B;
  p.context = L;
  p.best_ms_per_step = 1e30;
  double total = 0, weight_bytes = 0, kv_bytes = 0, loads = 0;
  const int64_t embed_row_bytes = model.weights().embed.row_bytes();
  for (int64_t i = 0; i < warm + steps; ++i) {
    for (int32_t s = 0; s < B; ++s)
      chunks[s] = {s,     ids.data() + i * B + s,
                   1,     LogitsWanted::kLast,
                   false, o.loras.empty() ? nullptr : o.loras[size_t(s) % o.loras.size()]};
    const double t0 = now_seconds();
    engine.step(chunks);
    engine.logits(0, B, logits.data());
    const double dt = now_seconds() - t0;
    if (i < warm) continue;
    total += dt;
    p.best_ms_per_step = std::min(p.best_ms_per_step, 1e3 * dt);
    const StepStats& st = engine.last_stats();
    weight_bytes += double(wb.dense + wb.lm_head + st.expert_loads * wb.per_expert + B * embed_row_bytes);
    kv_bytes += double(st.kv_bytes);
    loads += double(st.expert_loads);
  }
  const double n = double(steps);
  p.ms_per_step = 1e3 * total / n;
  p.tokens_per_second = double(B) / (total / n);
  p.weight_bytes_per_step = weight_bytes / n;
  p.kv_bytes_per_step = kv_bytes / n;
  p.bytes_per_step = p.weight_bytes_per_step + p.kv_bytes_per_step;
  p.expert_loads_per_step = loads / n;
  p.roofline_ms = 1e3 * p.bytes_per_step / (dram_gbps * 1e9);
  p.ratio = p.ms_per_step / p.roofline_ms;
  if (o.working_set_roofline) {
    p.ws_bandwidth_gbps = bandwidth(int64_t(p.bytes_per_step));
    p.ws_roofline_ms = 1e3 * p.bytes_per_step / (p.ws_bandwidth_gbps * 1e9);
    p.ws_ratio = p.ms_per_step / p.ws_roofline_ms;
  }
  if (o.spec_tokens > 0) p.verify_ms_per_step = bench_verify(model, o, B, L);
  if (o.spec_tokens > 0 && o.draft_model != nullptr) p.draft_ms_per_step = bench_draft(model, o, B, L);
  return p;
}

}  // namespace

InferBenchResult run_infer_bench(const InferModel& model, const InferBenchOptions& o, const BandwidthProbe& bandwidth,
                                 bool verbose) {
  const ZayaConfig& c = model.config();
  InferBenchResult r;
  r.dram_gbps = bandwidth(0);
  if (verbose) fmt::print("STREAM triad (DRAM, 480 MB of arrays): {:.1f} GB/s\n", r.dram_gbps);
  if (!o.prefill_lengths.empty() && verbose)
    fmt::print("prefill (one sequence, {}-token steps):\n  {:>8} {:>10} {:>12}\n", o.step_tokens, "tokens", "ms",
               "tokens/s");
  for (int64_t S : o.prefill_lengths) {
    ZAYA_CHECK(S >= 1 && S <= c.max_position, "--prefill {} is invalid; allowed: 1..{} (max_position_embeddings)", S,
               c.max_position);
    r.prefill.push_back(bench_prefill(model, o, S));
    const PrefillPoint& p = r.prefill.back();
    if (verbose) {
      fmt::print("  {:>8} {:>10.1f} {:>12.0f}\n", p.tokens, 1e3 * p.seconds, p.tokens_per_second);
      std::fflush(stdout);
    }
  }
  if (verbose && !o.batches.empty())
    fmt::print(
        "decode (one token per sequence per step; roofline = bytes read / bandwidth):\n"
        "  {:>5} {:>7} {:>9} {:>9} {:>10} {:>9} {:>8} {:>9} {:>8} {:>9} {:>7}\n",
        "batch", "context", "ms/step", "tokens/s", "MB/step", "experts", "DRAM ms", "x DRAM", "WS GB/s", "WS ms",
        "x WS");
  for (int64_t B : o.batches)
    for (int64_t L0 : o.contexts) {
      ZAYA_CHECK_USAGE(B >= 1, "--batch {} is invalid; allowed: >= 1", B);
      ZAYA_CHECK_USAGE(L0 >= 0, "--context {} is invalid; allowed: >= 0", L0);
      const int64_t room = c.max_position - o.decode_steps - o.warmup_steps;
      ZAYA_CHECK(room >= 0, "{} decode steps exceed max_position_embeddings {}", o.decode_steps + o.warmup_steps,
                 c.max_position);
      // A context at the model's limit still leaves room for the timed steps.
      const int64_t L = std::min(L0, room);
      r.decode.push_back(bench_decode(model, o, B, L, r.dram_gbps, bandwidth));
      const DecodePoint& p = r.decode.back();
      if (verbose) {
        fmt::print("  {:>5} {:>7} {:>9.3f} {:>9.1f} {:>10.2f} {:>9.1f} {:>8.3f} {:>9.2f} {:>8.1f} {:>9.3f} {:>7.2f}\n",
                   p.batch, p.context, p.ms_per_step, p.tokens_per_second, p.bytes_per_step / 1e6,
                   p.expert_loads_per_step, p.roofline_ms, p.ratio, p.ws_bandwidth_gbps, p.ws_roofline_ms, p.ws_ratio);
        if (o.spec_tokens > 0)
          fmt::print(
              "  {:>5} {:>7} verify {} drafted tokens per sequence: {:.3f} ms/step ({:.2f} x a decode step; "
              "speculation pays when a draft yields more than {:.2f} tokens)\n",
              p.batch, p.context, o.spec_tokens, p.verify_ms_per_step, p.verify_ms_per_step / p.ms_per_step,
              p.verify_ms_per_step / p.ms_per_step);
        if (o.spec_tokens > 0 && o.draft_model != nullptr && p.draft_ms_per_step < 0)
          fmt::print("  {:>5} {:>7} draft model: the context outgrows its {} positions\n", p.batch, p.context,
                     o.draft_model->config().max_position);
        else if (o.spec_tokens > 0 && o.draft_model != nullptr)
          fmt::print(
              "  {:>5} {:>7} draft model, {} tokens per sequence: {:.3f} ms ({:.2f} x a decode step); with the "
              "verification, speculation pays when a draft yields more than {:.2f} tokens\n",
              p.batch, p.context, o.spec_tokens, p.draft_ms_per_step, p.draft_ms_per_step / p.ms_per_step,
              (p.verify_ms_per_step + p.draft_ms_per_step) / p.ms_per_step);
        std::fflush(stdout);
      }
    }
  return r;
}

nlohmann::json infer_bench_json(const InferModel& model, const InferBenchOptions& o, const InferBenchResult& r) {
  const WeightBytes& wb = model.weight_bytes();
  nlohmann::json j = {
      {"bench", "infer"},
      {"model", model.source()},
      {"weights_dtype", model.matrix_dtype()},
      {"threads", omp_get_max_threads()},
      {"bf16_activations", o.bf16_activations},
      {"dram_gbps", r.dram_gbps},
      {"weight_bytes",
       {{"dense", wb.dense}, {"per_expert", wb.per_expert}, {"lm_head", wb.lm_head}, {"total", wb.total}}},
      {"prefill", nlohmann::json::array()},
      {"decode", nlohmann::json::array()}};
  j["weight_bytes"]["attention"] = wb.attention;  // of dense: the blocks' attention, and their routers
  j["weight_bytes"]["router"] = wb.router;
  for (const PrefillPoint& p : r.prefill)
    j["prefill"].push_back({{"tokens", p.tokens}, {"seconds", p.seconds}, {"tokens_per_second", p.tokens_per_second}});
  for (const DecodePoint& p : r.decode)
    j["decode"].push_back({{"batch", p.batch},
                           {"context", p.context},
                           {"ms_per_step", p.ms_per_step},
                           {"best_ms_per_step", p.best_ms_per_step},
                           {"tokens_per_second", p.tokens_per_second},
                           {"bytes_per_step", p.bytes_per_step},
                           {"weight_bytes_per_step", p.weight_bytes_per_step},
                           {"kv_bytes_per_step", p.kv_bytes_per_step},
                           {"expert_loads_per_step", p.expert_loads_per_step},
                           {"roofline_ms", p.roofline_ms},
                           {"ratio_to_roofline", p.ratio},
                           {"working_set_gbps", p.ws_bandwidth_gbps},
                           {"working_set_roofline_ms", p.ws_roofline_ms},
                           {"ratio_to_working_set_roofline", p.ws_ratio},
                           {"spec_tokens", o.spec_tokens},
                           {"verify_ms_per_step", p.verify_ms_per_step},
                           {"draft_ms_per_step", p.draft_ms_per_step}});
  return j;
}

}  // namespace zaya
