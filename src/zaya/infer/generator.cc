#include "zaya/infer/generator.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/infer/batch_scheduler.h"
#include "zaya/infer/engine.h"
#include "zaya/ops/cross_entropy.h"

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

namespace {

// Appends each chunk's rows of the last step's expert choices to its request's record (GenerationResult::routing).
void record_routing(const InferenceEngine& engine, const std::vector<StepChunk>& chunks,
                    const std::vector<size_t>& request_of, std::vector<GenerationResult>& results) {
  const ZayaConfig& c = engine.config();
  const int64_t J = c.top_k;
  int64_t row = 0;
  for (const StepChunk& ch : chunks) {
    std::vector<int32_t>& out = results[request_of[size_t(ch.slot)]].routing;
    for (int64_t i = 0; i < ch.count; ++i, ++row)
      for (int64_t b = 0; b < c.num_blocks; ++b) {
        const int32_t* choice = engine.step_choices(b) + row * J;
        out.insert(out.end(), choice, choice + J);
      }
  }
}

// Which running slots prefill a prompt that others (forks) wait to share: a
// request admitted while a slot with the same prompt and adapter is still
// prefilling it (and will sample from its last logits: max_new_tokens > 0)
// forks from that slot instead of prefilling it again.
class ForkPlan {
 public:
  explicit ForkPlan(int64_t slots) : leaders_(size_t(slots), nullptr), followers_(size_t(slots)) {}
  // The slot the request can fork from, or -1.
  int32_t leader(const GenerationRequest& q) const {
    if (q.max_new_tokens <= 0) return -1;
    for (size_t s = 0; s < leaders_.size(); ++s)
      if (leaders_[s] != nullptr && leaders_[s]->prompt == q.prompt && leaders_[s]->lora == q.lora) return int32_t(s);
    return -1;
  }
  // The slot starts prefilling the request's prompt (forks can join it when it will sample: max_new_tokens > 0).
  void lead(int32_t slot, const GenerationRequest& q) {
    leaders_[size_t(slot)] = q.max_new_tokens > 0 ? &q : nullptr;
    followers_[size_t(slot)].clear();
  }
  // The slot waits for the leader's last prompt logits.
  void follow(int32_t leader, int32_t slot) {
    leaders_[size_t(slot)] = nullptr;
    followers_[size_t(slot)].clear();
    followers_[size_t(leader)].push_back(slot);
  }
  // After a step that gave the slot logits: its forks, to copy it now (its prompt is in; it leads no more).
  std::vector<int32_t> take(int32_t slot) {
    leaders_[size_t(slot)] = nullptr;
    return std::exchange(followers_[size_t(slot)], {});
  }

 private:
  std::vector<const GenerationRequest*> leaders_;  // per slot: the request it prefills for forks, or null
  std::vector<std::vector<int32_t>> followers_;    // per slot: the slots that fork from it
};

}  // namespace

std::vector<GenerationResult> generate(const InferModel& model, const std::vector<GenerationRequest>& requests,
                                       const GeneratorOptions& o, const TokenCallback& on_token,
                                       const FinishCallback& on_finish, GenerationStats* stats) {
  return Generator().run(model, requests, o, on_token, on_finish, stats);
}

Generator::Generator() = default;
Generator::~Generator() = default;

std::vector<GenerationResult> Generator::run(const InferModel& model, const std::vector<GenerationRequest>& requests,
                                             const GeneratorOptions& o, const TokenCallback& on_token,
                                             const FinishCallback& on_finish, GenerationStats* stats) {
  const ZayaConfig& c = model.config();
  const int64_t sample_vocab = o.sample_vocab > 0 ? std::min(o.sample_vocab, c.real_vocab_size) : c.real_vocab_size;
  ZAYA_CHECK(o.max_batch >= 1, "batch size {} is invalid; allowed: >= 1", o.max_batch);
  ZAYA_CHECK(o.step_tokens >= 1, "tokens per step {} is invalid; allowed: >= 1", o.step_tokens);
  ZAYA_CHECK(!o.routing || o.spec.method == SpecMethod::kNone,
             "internal error: routing records are not kept with speculative decoding");
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
  // The last call's engine when it fits, else a new one. It fits with the same options, or with a longer
  // context (the finish rule below takes this call's `context`, not the engine's; not with speculative
  // decoding, whose drafts the engine's context bounds): a rollout's longest prompt differs from step to step.
  const auto fits = [&](const InferenceEngine& e) {
    EngineOptions same = eo;
    if (o.spec.method == SpecMethod::kNone && e.max_context() >= context) same.max_context = e.options().max_context;
    return e.options() == same && e.can_rebind(model);
  };
  if (engine_ != nullptr && fits(*engine_)) {
    for (int32_t s = 0; s < engine_->max_sequences(); ++s) engine_->reset(s);  // (a call that threw left some)
    engine_->rebind(model);
  } else {
    engine_.reset();  // its memory goes back before the new one takes its own
    engine_ = std::make_unique<InferenceEngine>(model, eo);
    ++engines_built_;
  }
  InferenceEngine& engine = *engine_;

  const double t_start = now_seconds();
  std::deque<size_t> waiting;
  for (size_t i = 0; i < requests.size(); ++i) waiting.push_back(i);
  // The pool holds every slot at full context: no page accounting, a free slot admits.
  SchedulerOptions so;
  so.slots = eo.max_sequences;
  so.step_tokens = eo.max_step_tokens;
  BatchScheduler sched(so);
  std::vector<size_t> request_of(eo.max_sequences);  // the request each running slot holds
  std::vector<Rng> rngs(eo.max_sequences, sampling_rng(0));
  // A Speculator only with speculation on: building one costs every call (its draft prices, a context per slot).
  o.spec.validate();  // (as a Speculator's construction checks it)
  std::optional<Speculator> speculator;
  if (o.spec.method != SpecMethod::kNone) speculator.emplace(o.spec, engine, sample_vocab);
  Speculator* const spec = speculator ? &*speculator : nullptr;
  const bool drafting = spec != nullptr;  // a Speculator exists only with a method (Speculator::enabled)
  // Logit rows: one per sequence, or with drafts as many as a step has tokens.
  std::vector<float>& logits = logits_;
  logits.resize(size_t((drafting ? eo.max_step_tokens : eo.max_sequences) * c.vocab_size));
  bool first_token = true;
  // Prompt sharing: not with speculative decoding (a draft model's own cache is per slot and not forked).
  const bool share = o.share_prompts && !drafting;
  ForkPlan forks(eo.max_sequences);

  auto finish = [&](int32_t slot, FinishReason why) {
    const size_t r = request_of[slot];
    results[r].finish = why;
    if (on_finish) on_finish(r, results[r]);
    sched.end(slot);
  };

  // Emits the tokens of one chunk with logits (rows: its logit rows): one sampled from its row, or a checked draft's.
  // `sampled`: the chunk's token when the step's rows were sampled together (below), else -1.
  std::vector<int32_t> one_token(1);
  auto emit_from = [&](const StepChunk& ch, const float* chunk_logits, bool has_prompt, int32_t sampled) {
    const int32_t s = ch.slot;
    const size_t r = request_of[s];
    if (sampled >= 0) one_token[0] = sampled;
    // Without a Speculator, a plain row sampled alone (a fork's first token) as Speculator::tokens samples it.
    if (sampled < 0 && !drafting)
      one_token[0] = sample_token(chunk_logits, sample_vocab, requests[r].sampling, rngs[s], sample_scratch_);
    const std::vector<int32_t>& emit =
        sampled >= 0 || !drafting
            ? one_token
            : spec->tokens(engine, ch, chunk_logits, c.vocab_size, sample_vocab, requests[r].sampling, rngs[s]);
    if (!has_prompt) st.decode_tokens += int64_t(emit.size());
    // Each emitted token at the length its cache had when it was predicted; the first that ends the sequence ends it.
    const int64_t length0 = engine.length(s) - int64_t(emit.size()) + 1;
    for (size_t i = 0; i < emit.size(); ++i) {
      const int32_t next = emit[i];
      if (first_token) {
        st.first_token_seconds = now_seconds() - t_start;
        first_token = false;
      }
      results[r].tokens.push_back(next);
      if (o.logprobs)
        results[r].logprobs.push_back(-cross_entropy_row(chunk_logits + int64_t(i) * c.vocab_size, next, sample_vocab));
      ++st.generated_tokens;
      const bool keep = !on_token || on_token(r, next);
      if (const std::optional<FinishReason> why =
              sched.accept(s, next, length0 + int64_t(i), context, keep ? CallerStop::kNone : CallerStop::kCancelled)) {
        finish(s, *why);
        break;
      }
    }
  };

  while (sched.running_count() > 0 || !waiting.empty()) {
    // Admit waiting requests into free slots: one whose prompt a running slot is prefilling forks from it.
    while (!waiting.empty()) {
      const size_t r = waiting.front();
      const int32_t s = sched.place({});
      if (s < 0) break;
      const int32_t from = share ? forks.leader(requests[r]) : -1;
      if (from >= 0) {
        sched.start_forked(s, requests[r], {});
        forks.follow(from, s);
        st.shared_prompt_tokens += int64_t(requests[r].prompt.size());
      } else {
        sched.start(s, requests[r], {});
        forks.lead(s, requests[r]);
        st.prompt_tokens += int64_t(requests[r].prompt.size());
      }
      waiting.pop_front();
      request_of[s] = r;
      rngs[s] = sampling_rng(requests[r].sampling.seed);
      engine.reset(s);
      if (drafting) spec->start(s, requests[r].prompt, requests[r].sampling);
    }
    for (int32_t s = 0; s < sched.slots(); ++s)
      if (sched.running(s))
        if (const std::optional<FinishReason> why = sched.ends_before_step(s, false)) finish(s, *why);
    const double t0 = now_seconds();  // drafting (a draft model's steps) is part of the step it serves
    if (drafting) spec->propose(sched, engine);
    const double t_drafted = drafting ? now_seconds() : t0;
    const std::vector<StepChunk>& chunks = sched.plan();
    if (chunks.empty()) continue;
    const bool has_prompt = sched.planned_prompt_tokens() > 0;
    engine.step(chunks);
    if (o.routing) record_routing(engine, chunks, request_of, results);
    const int64_t rows = engine.logit_rows();
    if (rows > 0) engine.logits(0, rows, logits.data());
    const double dt = now_seconds() - t0;
    ++st.steps;
    if (has_prompt) {
      st.prefill_seconds += dt;
    } else {
      st.decode_seconds += dt;
      st.draft_seconds += t_drafted - t0;
      ++st.decode_steps;
    }
    sched.advance();
    // Without drafts every row is one chunk's plain row: their tokens are sampled together (sample_tokens: the
    // tokens sample_token gives each alone), forks' first tokens apart, below.
    if (!drafting && rows > 0) {
      row_logits_.resize(size_t(rows));
      row_options_.resize(size_t(rows));
      row_rngs_.resize(size_t(rows));
      row_tokens_.resize(size_t(rows));
      for (int64_t row = 0; row < rows; ++row) {
        const int32_t s = chunks[engine.logit_row_chunk(row)].slot;
        row_logits_[size_t(row)] = logits.data() + row * c.vocab_size;
        row_options_[size_t(row)] = &requests[request_of[s]].sampling;
        row_rngs_[size_t(row)] = &rngs[s];
      }
      sample_tokens(rows, row_logits_.data(), sample_vocab, row_options_.data(), row_rngs_.data(), row_tokens_.data(),
                    sample_scratch_);
    }
    // The tokens of every chunk with logits.
    for (int64_t row = 0; row < rows;) {
      const StepChunk& ch = chunks[engine.logit_row_chunk(row)];
      const int32_t s = ch.slot;
      const size_t r = request_of[s];
      const int64_t n = ch.speculative ? ch.count : 1;
      const float* chunk_logits = logits.data() + row * c.vocab_size;  // row i predicted emitted token i
      const int32_t sampled = drafting ? -1 : row_tokens_[size_t(row)];
      row += n;
      // The slot's forks (none unless it just ended its prompt) become copies of it and sample from its row too.
      const std::vector<int32_t> followers = forks.take(s);
      emit_from(ch, chunk_logits, has_prompt, sampled);
      for (const int32_t f : followers) {
        engine.copy(s, f);
        if (o.routing) results[request_of[f]].routing = results[r].routing;  // the prompt's rows
        StepChunk fork = ch;
        fork.slot = f;
        emit_from(fork, chunk_logits, has_prompt, -1);
      }
    }
  }
  // Every sequence has ended: once their slots are emptied no page may be referenced (forks share pages).
  for (int32_t s = 0; s < sched.slots(); ++s) engine.reset(s);
  for (int64_t k = 0; k < engine.kv_kinds(); ++k)
    ZAYA_CHECK(engine.free_pages(k) == engine.pool_pages(k),
               "internal error: {} KV pages of kind {} are still referenced after every request finished",
               engine.pool_pages(k) - engine.free_pages(k), k);
  if (drafting) st.spec = spec->total();
  st.total_seconds = now_seconds() - t_start;
  if (stats) *stats = st;
  return results;
}

}  // namespace zaya
