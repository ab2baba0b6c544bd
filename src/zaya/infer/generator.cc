#include "zaya/infer/generator.h"

#include <algorithm>
#include <deque>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/infer/engine.h"

namespace zaya {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kContext: return "context";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "?";
}

namespace {

struct Active {
  size_t request = 0;
  int64_t fed = 0;    // prompt tokens already in the cache
  int32_t last = -1;  // last sampled token, fed at the next step
  Rng rng;
  bool busy = false;
};

}  // namespace

std::string generation_request_error(const GenerationRequest& r, const ZayaConfig& c, int64_t max_context) {
  try {
    r.sampling.validate();
  } catch (const Error& e) {
    return e.what();
  }
  if (r.prompt.empty()) return "the prompt is empty (it needs at least the BOS token)";
  if (r.max_new_tokens < 0) return fmt::format("max_new_tokens {} is negative; allowed: >= 0", r.max_new_tokens);
  const int64_t n = int64_t(r.prompt.size());
  if (n >= c.max_position)
    return fmt::format("the prompt ({} tokens) leaves no room under max_position_embeddings ({})", n, c.max_position);
  if (max_context > 0 && n >= max_context)
    return fmt::format("the prompt ({} tokens) leaves no room under --max-context ({})", n, max_context);
  for (size_t k = 0; k < r.prompt.size(); ++k)
    if (r.prompt[k] < 0 || r.prompt[k] >= c.vocab_size)
      return fmt::format("prompt token {} at position {} is outside the vocabulary 0..{}", r.prompt[k], k,
                         c.vocab_size - 1);
  return "";
}

std::vector<GenerationResult> generate(const InferModel& model, const std::vector<GenerationRequest>& requests,
                                       const GeneratorOptions& o, const TokenCallback& on_token,
                                       const FinishCallback& on_finish, GenerationStats* stats) {
  const ZayaConfig& c = model.config();
  const int64_t sample_vocab = o.sample_vocab > 0 ? std::min(o.sample_vocab, c.real_vocab_size) : c.real_vocab_size;
  ZAYA_CHECK(o.max_batch >= 1, "batch size {} is invalid; allowed: >= 1", o.max_batch);
  ZAYA_CHECK(o.step_tokens >= 1, "tokens per step {} is invalid; allowed: >= 1", o.step_tokens);
  int64_t context = 1;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& r = requests[i];
    const std::string error = generation_request_error(r, c, o.max_context);
    ZAYA_CHECK(error.empty(), "request {}: {}", i, error);
    context = std::max(context, int64_t(r.prompt.size()) + r.max_new_tokens);
  }
  context = std::min(context, c.max_position);
  if (o.max_context > 0) context = std::min(context, o.max_context);

  std::vector<GenerationResult> results(requests.size());
  GenerationStats st;
  st.requests = int64_t(requests.size());
  st.context = context;
  if (requests.empty()) {
    if (stats) *stats = st;
    return results;
  }
  EngineOptions eo;
  eo.max_sequences = std::min<int64_t>(o.max_batch, int64_t(requests.size()));
  eo.max_context = context;
  eo.max_step_tokens = std::max<int64_t>(o.step_tokens, eo.max_sequences);
  eo.bf16_activations = o.bf16_activations;
  InferenceEngine engine(model, eo);

  const double t_start = now_seconds();
  std::deque<size_t> waiting;
  for (size_t i = 0; i < requests.size(); ++i) waiting.push_back(i);
  std::vector<Active> slots(eo.max_sequences);
  std::vector<float> logits(eo.max_sequences * c.vocab_size);
  std::vector<std::pair<float, int32_t>> scratch;
  int64_t busy = 0;
  bool first_token = true;

  auto finish = [&](int32_t slot, FinishReason why) {
    Active& a = slots[slot];
    results[a.request].finish = why;
    if (on_finish) on_finish(a.request, results[a.request]);
    a.busy = false;
    --busy;
  };

  while (busy > 0 || !waiting.empty()) {
    // Admit waiting requests into free slots.
    for (int32_t s = 0; s < int32_t(slots.size()) && !waiting.empty(); ++s) {
      if (slots[s].busy) continue;
      const size_t r = waiting.front();
      waiting.pop_front();
      st.prompt_tokens += int64_t(requests[r].prompt.size());
      slots[s] = Active{r, 0, -1, sampling_rng(requests[r].sampling.seed), true};
      ++busy;
      engine.reset(s);
      if (requests[r].max_new_tokens == 0) finish(s, FinishReason::kLength);
    }
    if (busy == 0) continue;
    // Decoding sequences first (one token each), then prompt chunks in the remaining budget.
    std::vector<StepChunk> chunks;
    int64_t budget = eo.max_step_tokens;
    bool has_prompt = false;
    for (int32_t s = 0; s < int32_t(slots.size()); ++s) {
      const Active& a = slots[s];
      if (a.busy && a.fed == int64_t(requests[a.request].prompt.size())) {
        chunks.push_back({s, &slots[s].last, 1, LogitsWanted::kLast});
        --budget;
      }
    }
    for (int32_t s = 0; s < int32_t(slots.size()) && budget > 0; ++s) {
      const Active& a = slots[s];
      const auto& prompt = requests[a.request].prompt;
      if (!a.busy || a.fed == int64_t(prompt.size())) continue;
      const int64_t n = std::min(budget, int64_t(prompt.size()) - a.fed);
      const bool last = a.fed + n == int64_t(prompt.size());
      chunks.push_back({s, prompt.data() + a.fed, n, last ? LogitsWanted::kLast : LogitsWanted::kNone});
      budget -= n;
      has_prompt = true;
    }
    const double t0 = now_seconds();
    engine.step(chunks);
    const int64_t rows = engine.logit_rows();
    if (rows > 0) engine.logits(0, rows, logits.data());
    const double dt = now_seconds() - t0;
    ++st.steps;
    if (has_prompt) {
      st.prefill_seconds += dt;
    } else {
      st.decode_seconds += dt;
      ++st.decode_steps;
      st.decode_tokens += int64_t(chunks.size());
    }
    for (const StepChunk& ch : chunks)
      if (slots[ch.slot].fed < int64_t(requests[slots[ch.slot].request].prompt.size())) slots[ch.slot].fed += ch.count;
    // Sample for every row that has logits.
    for (int64_t row = 0; row < rows; ++row) {
      const int32_t s = chunks[engine.logit_row_chunk(row)].slot;
      Active& a = slots[s];
      const GenerationRequest& req = requests[a.request];
      const int32_t next = sample_token(logits.data() + row * c.vocab_size, sample_vocab, req.sampling, a.rng, scratch);
      if (first_token) {
        st.first_token_seconds = now_seconds() - t_start;
        first_token = false;
      }
      results[a.request].tokens.push_back(next);
      ++st.generated_tokens;
      a.last = next;
      const bool keep = !on_token || on_token(a.request, next);
      if (!keep)
        finish(s, FinishReason::kCancelled);
      else if (std::find(req.stop_ids.begin(), req.stop_ids.end(), next) != req.stop_ids.end())
        finish(s, FinishReason::kStop);
      else if (int64_t(results[a.request].tokens.size()) >= req.max_new_tokens)
        finish(s, FinishReason::kLength);
      else if (engine.length(s) >= engine.max_context())
        finish(s, FinishReason::kContext);
    }
  }
  st.total_seconds = now_seconds() - t_start;
  if (stats) *stats = st;
  return results;
}

}  // namespace zaya
