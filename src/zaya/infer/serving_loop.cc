#include "zaya/infer/serving_loop.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include <fmt/format.h>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/infer/batch_scheduler.h"
#include "zaya/infer/completion_text.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/prefix_cache.h"
#include "zaya/infer/sampling.h"
#include "zaya/infer/token_logprobs.h"

namespace zaya {

bool ServeChannel::wait(std::vector<ServeEvent>& out, double timeout_seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, timeout_seconds)), [&] { return !events_.empty(); });
  if (events_.empty()) return false;
  for (ServeEvent& e : events_) out.push_back(std::move(e));
  events_.clear();
  return true;
}

void ServeChannel::push(ServeEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

// A sequence in a slot: its request, text and sampling stream (its progress is the scheduler's).
struct ServingLoop::Sequence {
  Pending p;
  CompletionText text;
  Rng rng;
  std::unique_ptr<TokenConstraint> constraint;  // response_format (token_constraint.h); null: none

  explicit Sequence(Pending pending, const Tokenizer& tok)
      : p(std::move(pending)),
        text(tok, p.request.generation.stop_ids, p.request.stop_strings),
        rng(sampling_rng(p.request.generation.sampling.seed)),
        constraint(p.request.constraint ? p.request.constraint() : nullptr) {}
};

namespace {
// The speculator's totals into the counters (the caller holds their mutex).
void count_serving_drafts(ServingCounters& n, const Speculator& spec) {
  n.spec_drafts = spec.total().drafts;
  n.spec_drafted_tokens = spec.total().drafted;
  n.spec_accepted_tokens = spec.total().accepted;
}
}  // namespace

ServingLoop::ServingLoop(const InferModel& model, const Tokenizer& tok, const ServingOptions& o)
    : model_(model), tok_(tok), options_(o) {
  const ZayaConfig& c = model.config();
  ZAYA_CHECK(o.max_batch >= 1, "batch size {} is invalid; allowed: >= 1", o.max_batch);
  ZAYA_CHECK(o.step_tokens >= 1, "tokens per step {} is invalid; allowed: >= 1", o.step_tokens);
  ZAYA_CHECK(o.max_waiting >= 0, "queue length {} is invalid; allowed: >= 0", o.max_waiting);
  ZAYA_CHECK(o.max_context >= 0, "context {} is invalid; allowed: >= 0 (0: max_position_embeddings)", o.max_context);
  ZAYA_CHECK(o.prefix_cache_bytes >= 0, "prefix cache {} bytes is invalid; allowed: >= 0", o.prefix_cache_bytes);
  ZAYA_CHECK(o.prefix_block >= 1, "prefix block {} is invalid; allowed: >= 1 tokens", o.prefix_block);
  ZAYA_CHECK(o.kv_cache_bytes >= 0, "KV cache of {} bytes is invalid; allowed: >= 0 (0: the batch at full context)",
             o.kv_cache_bytes);
  context_ = o.max_context > 0 ? std::min(o.max_context, c.max_position) : c.max_position;
  sample_vocab_ = o.sample_vocab > 0 ? std::min(o.sample_vocab, c.real_vocab_size) : c.real_vocab_size;
  EngineOptions eo;
  eo.max_sequences = o.max_batch;
  eo.max_context = context_;
  eo.max_step_tokens = std::max(o.step_tokens, o.max_batch);
  eo.bf16_activations = o.bf16_activations;
  eo.page_tokens = o.prefix_block;
  eo.kv_pool_bytes = o.kv_cache_bytes;
  if (o.kv_cache_bytes == 0 && o.prefix_cache_bytes > 0) {
    // The batch at full context, plus the snapshots' pages.
    EngineOptions probe = eo;
    probe.max_sequences = 1;
    probe.max_step_tokens = 1;
    eo.kv_pool_bytes = o.max_batch * InferenceEngine(model, probe).state_bytes_per_slot() + o.prefix_cache_bytes;
  }
  engine_ = std::make_unique<InferenceEngine>(model, eo);
  cache_ = std::make_unique<PrefixCache>(*engine_);
  SchedulerOptions so;
  so.slots = o.max_batch;
  so.step_tokens = engine_->max_step_tokens();
  so.snapshot_block = o.prefix_cache_bytes > 0 ? engine_->page_tokens() : 0;
  for (int64_t k = 0; k < engine_->kv_kinds(); ++k) so.pool_pages.push_back(engine_->pool_pages(k));
  sched_ = std::make_unique<BatchScheduler>(so);
  spec_ = std::make_unique<Speculator>(o.spec, *engine_, sample_vocab_);
  for (int64_t k = 0; k < engine_->kv_kinds(); ++k) {
    counters_.kv_pages += engine_->pool_pages(k);
    counters_.kv_page_bytes += engine_->page_bytes(k);
  }
  slots_.resize(o.max_batch);
  thread_ = std::thread([this] { run(); });
}

ServingLoop::~ServingLoop() { stop(); }

std::vector<int64_t> ServingLoop::reservation(const TextRequest& r) const {
  const int64_t n = int64_t(r.generation.prompt.size());
  return engine_->max_pages(std::min(context_, n + std::min(r.generation.max_new_tokens, context_)));
}

std::string ServingLoop::request_error(const TextRequest& r) const {
  std::string error = generation_request_error(r.generation, model_.config(), context_);
  if (!error.empty()) return error;
  const std::vector<int64_t> need = reservation(r);
  for (int64_t k = 0; k < engine_->kv_kinds(); ++k)
    if (need[k] > engine_->pool_pages(k))
      return fmt::format(
          "the prompt ({} tokens) and max_tokens ({}) need {} KV pages of {} tokens, more than the pool's {} "
          "(--kv-cache-mb); lower max_tokens",
          r.generation.prompt.size(), r.generation.max_new_tokens, need[k], engine_->page_tokens(),
          engine_->pool_pages(k));
  return "";
}

std::shared_ptr<ServeChannel> ServingLoop::submit(std::vector<TextRequest> requests, int64_t top_logprobs) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string error = request_error(requests[i]);
    ZAYA_CHECK(error.empty(), "{}", error);
  }
  auto channel = std::make_shared<ServeChannel>(requests.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ ||
        int64_t(queue_.size() + requests.size()) > options_.max_waiting + options_.max_batch - counters_.running)
      return nullptr;
    for (size_t i = 0; i < requests.size(); ++i)
      queue_.push_back(Pending{channel, i, std::move(requests[i]), top_logprobs});
    counters_.waiting = int64_t(queue_.size());
  }
  cv_.notify_all();
  return channel;
}

ServingCounters ServingLoop::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void ServingLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ServingLoop::finish(int32_t slot, FinishReason why) {
  Sequence& s = *slots_[slot];
  ServeEvent e;
  e.kind = ServeEvent::Kind::kFinish;
  e.choice = s.p.choice;
  e.text = s.text.finish();
  // A stop string ends the sequence through its text: to the client it is a stop.
  e.finish = s.text.stopped() && why != FinishReason::kCancelled ? FinishReason::kStop : why;
  e.tokens = sched_->generated(slot);
  e.spec = spec_->counts(slot);
  e.time = now_seconds();
  engine_->reset(slot);  // its pages go back to the pool (those snapshots share stay with them)
  {
    // Counted before the event goes out: a client that sees its end sees the counters with it.
    std::lock_guard<std::mutex> lock(mu_);
    --counters_.running;
    if (why == FinishReason::kCancelled) ++counters_.cancelled;
    sched_->end(slot);
    counters_.kv_pages_reserved = sched_->reserved_total();
    counters_.kv_pages_used = 0;
    for (int64_t k = 0; k < engine_->kv_kinds(); ++k)
      counters_.kv_pages_used += engine_->pool_pages(k) - engine_->free_pages(k);
    count_serving_drafts(counters_, *spec_);
  }
  s.p.channel->push(std::move(e));
  slots_[slot].reset();
}

void ServingLoop::fail_all(const std::string& message) {
  auto error = [&](const std::shared_ptr<ServeChannel>& ch, size_t choice) {
    ServeEvent e;
    e.kind = ServeEvent::Kind::kError;
    e.choice = choice;
    e.text = message;
    e.time = now_seconds();
    ch->push(std::move(e));
  };
  for (int32_t i = 0; i < int32_t(slots_.size()); ++i)
    if (slots_[i]) {
      error(slots_[i]->p.channel, slots_[i]->p.choice);
      slots_[i].reset();
      engine_->reset(i);
      if (sched_->running(i)) sched_->end(i);
    }
  std::lock_guard<std::mutex> lock(mu_);
  counters_.kv_pages_reserved = 0;
  for (Pending& p : queue_) error(p.channel, p.choice);
  queue_.clear();
  counters_.running = 0;
  counters_.waiting = 0;
}

void ServingLoop::run() {
  try {
    run_steps();
  } catch (const std::exception& e) {
    fail_all(e.what());
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
}

void ServingLoop::run_steps() {
  const ZayaConfig& c = model_.config();
  InferenceEngine& engine = *engine_;
  PrefixCache& cache = *cache_;
  const bool caching = options_.prefix_cache_bytes > 0;
  BatchScheduler& sched = *sched_;
  const int64_t kinds = engine.kv_kinds();
  std::vector<int32_t> admitted;
  std::vector<float> logits(engine.max_step_tokens() * c.vocab_size);
  std::vector<float> masked;  // a constrained sequence's row
  Speculator& spec = *spec_;

  while (true) {
    // Admit waiting sequences into free slots; sleep while there is nothing to do.
    std::vector<Pending> cancelled;
    admitted.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto idle = [&] {
        return std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return bool(s); });
      };
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !idle(); });
      if (stopping_) break;
      while (!queue_.empty() && !sched.full()) {
        if (queue_.front().channel->cancelled()) {
          cancelled.push_back(std::move(queue_.front()));
          queue_.pop_front();
          continue;
        }
        // In arrival order, each when its pages fit beside the running sequences' reservations.
        std::vector<int64_t> need = reservation(queue_.front().request);
        const int32_t s = sched.place(need);
        if (s == BatchScheduler::kNoPages) {
          ++counters_.waiting_for_pages;
          break;
        }
        slots_[s] = std::make_unique<Sequence>(std::move(queue_.front()), tok_);
        queue_.pop_front();
        sched.start(s, slots_[s]->p.request.generation, std::move(need));
        ++counters_.running;
        admitted.push_back(s);
      }
      counters_.kv_pages_reserved = sched.reserved_total();
      counters_.waiting = int64_t(queue_.size());
    }
    // A new sequence starts empty, or from the longest snapshot its prompt begins with.
    for (int32_t s : admitted) {
      engine.reset(s);
      spec.start(s, slots_[s]->p.request.generation.prompt, slots_[s]->p.request.generation.sampling,
                 !slots_[s]->constraint);  // constrained: no drafts
      const GenerationRequest& g = slots_[s]->p.request.generation;
      const int64_t hit = caching ? cache.start(g.prompt, s, g.lora ? g.lora->serial() : 0) : 0;
      if (hit == 0) continue;
      sched.resume_at(s, hit);
      std::lock_guard<std::mutex> lock(mu_);
      counters_.prefix_hit_tokens += hit;
    }
    for (Pending& p : cancelled) {
      ServeEvent e;
      e.kind = ServeEvent::Kind::kFinish;
      e.choice = p.choice;
      e.finish = FinishReason::kCancelled;
      e.time = now_seconds();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++counters_.cancelled;
      }
      p.channel->push(std::move(e));
    }
    for (int32_t s = 0; s < int32_t(slots_.size()); ++s)
      if (slots_[s])
        if (const std::optional<FinishReason> why = sched.ends_before_step(s, slots_[s]->p.channel->cancelled()))
          finish(s, *why);
    // Drafts, then the scheduler's plan, as generate()'s; prompt chunks end at snapshot blocks when caching.
    if (spec.enabled()) spec.propose(sched, engine);
    const std::vector<StepChunk>& chunks = sched.plan();
    const int64_t prompt_tokens = sched.planned_prompt_tokens();
    if (chunks.empty()) continue;
    // The reservations leave room for every step: only snapshots need evicting.
    ZAYA_CHECK(cache.make_room(engine.pages_needed(chunks)),
               "internal error: the KV pool has no free pages for a step within the reservations");
    engine.step(chunks);
    const int64_t rows = engine.logit_rows();
    if (rows > 0) engine.logits(0, rows, logits.data());
    // A prompt chunk that ends at a block boundary (before the prompt's last token): snapshot the state.
    for (int32_t s : sched.advance()) {
      const GenerationRequest& g = slots_[s]->p.request.generation;
      cache.insert(g.prompt, s, g.lora ? g.lora->serial() : 0);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      counters_.prefix_evictions = cache.evictions();
      counters_.prefix_snapshots = cache.size();
      counters_.kv_pages_used = 0;
      for (int64_t k = 0; k < kinds; ++k) counters_.kv_pages_used += engine.pool_pages(k) - engine.free_pages(k);
      ++counters_.steps;
      counters_.prefill_tokens += prompt_tokens;
    }
    // The tokens of every chunk with logits: one sampled from its row, or a checked draft's (spec_decode.h).
    for (int64_t row = 0; row < rows;) {
      const StepChunk& ch = chunks[engine.logit_row_chunk(row)];
      const int32_t s = ch.slot;
      Sequence& q = *slots_[s];
      const GenerationRequest& req = q.p.request.generation;
      const float* rows0 = logits.data() + row * c.vocab_size;
      row += ch.speculative ? ch.count : 1;
      if (q.constraint) {  // the ids it rules out get -inf before sampling; none left: the sequence ends
        masked.assign(rows0, rows0 + c.vocab_size);
        if (!q.constraint->mask(masked.data(), c.vocab_size)) {
          finish(s, q.constraint->complete() ? FinishReason::kStop : FinishReason::kLength);
          continue;
        }
      }
      const std::vector<int32_t>& emit = spec.tokens(engine, ch, q.constraint ? masked.data() : rows0, c.vocab_size,
                                                     sample_vocab_, req.sampling, q.rng);
      const int64_t length0 = engine.length(s) - int64_t(emit.size()) + 1;
      for (size_t i = 0; i < emit.size(); ++i) {
        const int32_t next = emit[i];
        const float* lg = rows0 + int64_t(i) * c.vocab_size;  // token i was predicted by the chunk's row i
        ServeEvent e;
        e.choice = q.p.choice;
        e.token = next;
        e.text = q.text.push(next);
        if (q.constraint) q.constraint->accept(next);
        // The text is the loop's: a stop string it completed ends the sequence as a stop.
        const std::optional<FinishReason> why =
            sched.accept(s, next, length0 + int64_t(i), engine.max_context(),
                         q.text.stopped() ? CallerStop::kStopString : CallerStop::kNone);
        if (q.p.top_logprobs >= 0) {
          TokenLogprobs lp = token_logprobs(lg, sample_vocab_, next, q.p.top_logprobs);
          e.logprob = lp.chosen;
          e.top = std::move(lp.top);
        }
        e.time = now_seconds();
        q.p.channel->push(std::move(e));
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++counters_.generated_tokens;
        }
        if (why) {
          finish(s, *why);
          break;
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      count_serving_drafts(counters_, spec);
    }
  }
  // Stopping: every sequence still running or queued ends cancelled.
  for (int32_t s = 0; s < int32_t(slots_.size()); ++s)
    if (slots_[s]) finish(s, FinishReason::kCancelled);
  std::lock_guard<std::mutex> lock(mu_);
  for (Pending& p : queue_) {
    ServeEvent e;
    e.kind = ServeEvent::Kind::kFinish;
    e.choice = p.choice;
    e.finish = FinishReason::kCancelled;
    e.time = now_seconds();
    p.channel->push(std::move(e));
  }
  queue_.clear();
  counters_.waiting = 0;
}

}  // namespace zaya
