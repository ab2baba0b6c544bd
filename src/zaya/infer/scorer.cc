#include "zaya/infer/scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "zaya/core/error.h"
#include "zaya/infer/batch_scheduler.h"
#include "zaya/infer/engine.h"

namespace zaya {

TargetLogprob target_logprob(const float* logits, int64_t vocab, int32_t target) {
  float mx = -std::numeric_limits<float>::infinity();
  int64_t arg = 0;
  for (int64_t v = 0; v < vocab; ++v)
    if (logits[v] > mx) {
      mx = logits[v];
      arg = v;
    }
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - double(mx));
  return {double(logits[target]) - double(mx) - std::log(sum), arg == target};
}

namespace {

// Scores targets against the logit rows of the engine's last step. `rows` is
// sorted by row; a row may carry several targets (one per continuation that
// shares a prefix). Logits are computed once per row, `block` rows at a time.
struct RowTarget {
  int64_t row;
  int32_t target;
  ContinuationScore* into;
};

void score_rows(InferenceEngine& engine, const std::vector<RowTarget>& rows, int64_t vocab, std::vector<float>& buf,
                int64_t block, int64_t token_top) {
  const int64_t V = engine.config().vocab_size, R = engine.logit_rows();
  std::vector<TargetLogprob> out(rows.size());
  std::vector<TokenLogprobs> detail(token_top >= 0 ? rows.size() : 0);
  size_t e = 0;
  for (int64_t r0 = 0; r0 < R && e < rows.size(); r0 += block) {
    const int64_t r1 = std::min(R, r0 + block);
    size_t e1 = e;
    while (e1 < rows.size() && rows[e1].row < r1) ++e1;
    if (e1 == e) continue;
    engine.logits(r0, r1, buf.data());
    const int64_t n = int64_t(e1 - e);
#pragma omp parallel for schedule(static) if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      const RowTarget& t = rows[e + i];
      out[e + i] = target_logprob(buf.data() + (t.row - r0) * V, vocab, t.target);
      if (token_top >= 0) detail[e + i] = token_logprobs(buf.data() + (t.row - r0) * V, vocab, t.target, token_top);
    }
    e = e1;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].into->logprob += out[i].logprob;
    rows[i].into->tokens += 1;
    rows[i].into->greedy = rows[i].into->greedy && out[i].greedy;
    // Rows come in token order per continuation (phase A's first token, then phase B's chunks in order).
    if (token_top >= 0) rows[i].into->per_token.push_back(std::move(detail[i]));
  }
}

// Token t of continuation k of `g` counts for its score.
bool counts(const ScoreGroup& g, size_t k, int64_t t) { return g.counted.empty() || g.counted[k][size_t(t)] != 0; }

}  // namespace

std::vector<std::vector<ContinuationScore>> score_groups(const InferModel& model, const std::vector<ScoreGroup>& groups,
                                                         const ScorerOptions& o,
                                                         const std::function<void(size_t, size_t)>& progress) {
  const ZayaConfig& c = model.config();
  const int64_t vocab = o.score_vocab > 0 ? std::min(o.score_vocab, c.real_vocab_size) : c.real_vocab_size;
  ZAYA_CHECK(o.max_batch >= 1 && o.step_tokens >= 1, "scoring needs a batch ({}) and step size ({}) of at least 1",
             o.max_batch, o.step_tokens);
  int64_t context = 1, widest = 1;
  for (size_t g = 0; g < groups.size(); ++g) {
    const ScoreGroup& gr = groups[g];
    ZAYA_CHECK(!gr.prefix.empty(), "scoring request {}: the context is empty (it needs at least BOS)", g);
    ZAYA_CHECK(!gr.continuations.empty(), "scoring request {}: no continuation to score", g);
    for (int32_t id : gr.prefix)
      ZAYA_CHECK(id >= 0 && id < c.vocab_size, "scoring request {}: context token {} is outside the vocabulary 0..{}",
                 g, id, c.vocab_size - 1);
    ZAYA_CHECK(gr.counted.empty() || gr.counted.size() == gr.continuations.size(),
               "scoring request {}: {} counted-token masks for {} continuations", g, gr.counted.size(),
               gr.continuations.size());
    for (size_t k = 0; k < gr.continuations.size(); ++k) {
      const auto& cont = gr.continuations[k];
      ZAYA_CHECK(!cont.empty(), "scoring request {}: continuation {} has no tokens", g, k);
      ZAYA_CHECK(gr.counted.empty() || gr.counted[k].size() == cont.size(),
                 "scoring request {}: continuation {} has {} tokens but a counted-token mask of {}", g, k, cont.size(),
                 gr.counted.empty() ? 0 : gr.counted[k].size());
      for (int32_t id : cont)
        ZAYA_CHECK(id >= 0 && id < vocab,
                   "scoring request {}: continuation {} token {} is outside the scored vocabulary 0..{}", g, k, id,
                   vocab - 1);
      const int64_t need = int64_t(gr.prefix.size() + cont.size()) - 1;
      ZAYA_CHECK(need <= c.max_position,
                 "scoring request {}: context + continuation {} = {} tokens exceeds max_position_embeddings {}", g, k,
                 need + 1, c.max_position);
      context = std::max(context, need);
    }
    widest = std::max(widest, int64_t(gr.continuations.size()));
  }
  std::vector<std::vector<ContinuationScore>> scores(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) scores[g].resize(groups[g].continuations.size());
  if (groups.empty()) return scores;

  EngineOptions eo;
  eo.max_sequences = std::max(o.max_batch, widest);
  eo.max_context = context;
  eo.max_step_tokens = std::max(o.step_tokens, eo.max_sequences);
  eo.bf16_activations = o.bf16_activations;
  InferenceEngine engine(model, eo);
  // The step plans are the batch scheduler's, as generation's: teacher-forced
  // sequences in slot order within the step budget (no page accounting: the
  // pool holds every slot at full context).
  SchedulerOptions so;
  so.slots = eo.max_sequences;
  so.step_tokens = eo.max_step_tokens;
  BatchScheduler sched(so);
  const int64_t V = c.vocab_size;
  const int64_t block = std::clamp<int64_t>((int64_t(16) << 20) / V, 1, eo.max_step_tokens);
  std::vector<float> buf(block * V);
  std::vector<RowTarget> rows;
  // Per slot: the group (of this batch) and continuation it runs.
  std::vector<std::pair<size_t, size_t>> of_slot(size_t(eo.max_sequences));

  size_t g0 = 0;
  while (g0 < groups.size()) {
    // Pack groups whose continuations fit the slots; group i's continuation k runs in slot base[i] + k.
    size_t g1 = g0;
    int64_t used = 0;
    std::vector<int32_t> base;
    while (g1 < groups.size() && used + int64_t(groups[g1].continuations.size()) <= eo.max_sequences) {
      base.push_back(int32_t(used));
      used += int64_t(groups[g1].continuations.size());
      ++g1;
    }
    const size_t n = g1 - g0;
    // Phase A: the prefixes, chunked to the step budget; the last row's logits score every continuation's first token.
    for (size_t i = 0; i < n; ++i) {
      engine.reset(base[i]);
      sched.start_forced(base[i], groups[g0 + i].prefix, LogitsWanted::kLast);
      of_slot[size_t(base[i])] = {i, 0};
    }
    for (;;) {
      const std::vector<StepChunk>& chunks = sched.plan();
      if (chunks.empty()) break;
      engine.step(chunks);
      rows.clear();
      for (int64_t r = 0; r < engine.logit_rows(); ++r) {
        const size_t i = of_slot[size_t(chunks[engine.logit_row_chunk(r)].slot)].first;
        for (size_t k = 0; k < groups[g0 + i].continuations.size(); ++k)
          if (counts(groups[g0 + i], k, 0)) rows.push_back({r, groups[g0 + i].continuations[k][0], &scores[g0 + i][k]});
      }
      score_rows(engine, rows, vocab, buf, block, o.token_top);
      sched.advance();
    }
    for (size_t i = 0; i < n; ++i) sched.end(base[i]);
    // Fork each prefix into its continuations' slots (continuation 0 keeps the prefix slot).
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 1; k < groups[g0 + i].continuations.size(); ++k) engine.copy(base[i], base[i] + int32_t(k));
    // Phase B: continuation tokens 0..m-2 fed with logits on every row; row j scores token j+1.
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < groups[g0 + i].continuations.size(); ++k) {
        const auto& cont = groups[g0 + i].continuations[k];
        if (cont.size() < 2) continue;
        const int32_t slot = base[i] + int32_t(k);
        sched.start_forced(slot, std::span<const int32_t>(cont.data(), cont.size() - 1), LogitsWanted::kAll);
        of_slot[size_t(slot)] = {i, k};
      }
    for (;;) {
      const std::vector<StepChunk>& chunks = sched.plan();
      if (chunks.empty()) break;
      engine.step(chunks);
      rows.clear();
      int64_t r = 0;
      for (const StepChunk& ch : chunks) {
        const auto [i, k] = of_slot[size_t(ch.slot)];
        const auto& cont = groups[g0 + i].continuations[k];
        const int64_t start = sched.fed(ch.slot);  // the chunk's first continuation index
        for (int64_t j = 0; j < ch.count; ++j, ++r) {
          const int64_t t = start + j + 1;
          if (counts(groups[g0 + i], k, t)) rows.push_back({r, cont[t], &scores[g0 + i][k]});
        }
      }
      score_rows(engine, rows, vocab, buf, block, o.token_top);
      sched.advance();
    }
    for (int32_t slot = 0; slot < sched.slots(); ++slot)
      if (sched.running(slot)) sched.end(slot);
    g0 = g1;
    if (progress) progress(g0, groups.size());
  }
  return scores;
}

}  // namespace zaya
