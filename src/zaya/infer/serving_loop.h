#pragma once
// Continuous batching for a server: one thread owns the cached decoder and
// runs the generator's loop (generator.h) over requests that arrive while it
// runs, with the same scheduler (batch_scheduler.h: admission, step plans,
// finish rule). Front-end threads submit requests and read their events from a
// channel; a request joins the running batch at the next step (chunked
// prefill beside the decoding sequences), and a channel that is cancelled (its
// client went away) frees its slots at the next step.
// With prefix caching on, a prompt starts from the longest snapshot of an
// earlier prompt's state it begins with (prefix_cache.h: it references the
// snapshot's KV pages), and its prefill chunks end at page boundaries so that
// its own state is snapshotted there.
//
// The KV cache is one pool of pages (kv_page_pool.h) shared by the running
// sequences and the snapshots. A sequence joins the batch only when the pages
// it may hold at its longest (prompt + max_tokens, under the context) fit
// beside those reserved by the running ones; until then it waits in the
// queue, and a full queue refuses new requests (submit returns nullptr: the
// server's 503). Snapshots live in the pages nobody reserved and are evicted
// (least recently used) when a step needs their pages. So a step never runs
// out of pages, whatever the load; a request that could not fit even alone
// is refused up front (request_error).
//
// Each sequence samples from its own seeded stream (sampling_rng) and its text
// goes through the same stop ids and stop strings as zaya generate's
// (completion_text.h), so a request gives the tokens and text `generate_text`
// gives it for the same seed, whatever it is batched with.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/spec_decode.h"
#include "zaya/infer/text_request.h"

namespace zaya {

class BatchScheduler;
class InferenceEngine;
class PrefixCache;

struct ServingOptions {
  int64_t max_batch = 8;         // sequences decoded together (engine slots)
  int64_t max_context = 0;       // tokens per sequence, prompt included; 0: max_position_embeddings
  int64_t step_tokens = 256;     // tokens per forward step (prefill chunk size)
  int64_t max_waiting = 256;     // sequences queued beyond the running ones; submit refuses more
  int64_t sample_vocab = 0;      // ids >= this are never sampled; 0: the config's real vocabulary
  bool bf16_activations = true;  // see EngineOptions
  // The KV page pool (engine.h), in bytes; 0: max_batch sequences at the full
  // context plus prefix_cache_bytes.
  int64_t kv_cache_bytes = 0;
  // Prefix caching (prefix_cache.h): on when > 0; with kv_cache_bytes 0 these
  // bytes of pages are added to the pool for the snapshots.
  int64_t prefix_cache_bytes = 0;
  // Tokens per KV page; snapshots are taken at multiples of it.
  int64_t prefix_block = 64;
  SpecOptions spec;  // speculative decoding (spec_decode.h); off by default
};

struct ServeEvent {
  enum class Kind { kToken, kFinish, kError };
  Kind kind = Kind::kToken;
  size_t choice = 0;  // which of the channel's requests
  // kToken: the text this token made final (often "", see completion_text.h);
  // kFinish: the rest of the text; kError: the message.
  std::string text;
  int32_t token = -1;                           // kToken
  float logprob = 0;                            // kToken, when logprobs were asked for
  std::vector<std::pair<int32_t, float>> top;   // kToken: the most likely ids and their log probabilities
  FinishReason finish = FinishReason::kLength;  // kFinish (kStop for a stop id or string)
  int64_t tokens = 0;                           // kFinish: tokens generated
  SpecCounts spec;                              // kFinish: the sequence's speculative drafts (spec_decode.h)
  double time = 0;                              // now_seconds() when the event was made
};

// The events of one front-end request (its `n` sequences).
class ServeChannel {
 public:
  explicit ServeChannel(size_t choices) : choices_(choices) {}
  size_t choices() const { return choices_; }
  // Moves the pending events into `out` (appended); waits up to `timeout_seconds`
  // for one. Returns whether any came.
  bool wait(std::vector<ServeEvent>& out, double timeout_seconds);
  // Ends the channel's sequences at the loop's next step (FinishReason::kCancelled).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  void push(ServeEvent event);

 private:
  const size_t choices_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ServeEvent> events_;
  std::atomic<bool> cancelled_{false};
};

struct ServingCounters {
  int64_t running = 0;               // sequences in the batch
  int64_t waiting = 0;               // sequences queued
  int64_t prefill_tokens = 0;        // prompt tokens run through the decoder
  int64_t generated_tokens = 0;      // tokens sampled
  int64_t steps = 0;                 // forward steps
  int64_t cancelled = 0;             // sequences ended by a cancelled channel
  int64_t prefix_hit_tokens = 0;     // prompt tokens restored from prefix snapshots instead of run
  int64_t prefix_snapshots = 0;      // snapshots held
  int64_t prefix_evictions = 0;      // snapshots evicted to free pages
  int64_t kv_pages = 0;              // pages in the pool (all attention kinds)
  int64_t kv_pages_used = 0;         // pages referenced by sequences or snapshots
  int64_t kv_pages_reserved = 0;     // pages the running sequences may hold at their longest
  int64_t kv_page_bytes = 0;         // bytes of one page (all kinds' layers)
  int64_t waiting_for_pages = 0;     // times the queue's first sequence waited for pages to be unreserved
  int64_t spec_drafts = 0;           // speculative decoding: drafts checked,
  int64_t spec_drafted_tokens = 0;   // draft tokens checked,
  int64_t spec_accepted_tokens = 0;  // and of them accepted
};

class ServingLoop {
 public:
  ServingLoop(const InferModel& model, const Tokenizer& tokenizer, const ServingOptions& options);
  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;
  ~ServingLoop();  // stop()

  // Tokens per sequence, prompt included.
  int64_t context() const { return context_; }
  // Why `request` (prompt ids set) cannot run here, or "" (generation_request_error under context()).
  std::string request_error(const TextRequest& request) const;

  // Queues the requests as choices 0..n-1 of one channel; `top_logprobs` >= 0
  // asks for each token's log probability and that many alternatives (-1: none).
  // Returns nullptr when the queue has no room for them (or the loop has
  // stopped); fails when a request cannot run (request_error).
  std::shared_ptr<ServeChannel> submit(std::vector<TextRequest> requests, int64_t top_logprobs = -1);

  ServingCounters counters() const;

  // Ends every sequence (cancelled) and the loop thread; submit refuses from then on.
  void stop();

 private:
  struct Sequence;
  struct Pending {
    std::shared_ptr<ServeChannel> channel;
    size_t choice = 0;
    TextRequest request;
    int64_t top_logprobs = -1;
  };

  void run();
  void run_steps();
  void admit();
  void finish(int32_t slot, FinishReason why);
  void fail_all(const std::string& message);
  // Pages of each kind a request may hold at its longest.
  std::vector<int64_t> reservation(const TextRequest& request) const;

  const InferModel& model_;
  const Tokenizer& tok_;
  ServingOptions options_;
  int64_t context_ = 0, sample_vocab_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  ServingCounters counters_;

  std::unique_ptr<InferenceEngine> engine_;       // loop thread only (its geometry is read by request_error)
  std::unique_ptr<PrefixCache> cache_;            // loop thread only
  std::vector<std::unique_ptr<Sequence>> slots_;  // loop thread only
  std::unique_ptr<BatchScheduler> sched_;         // loop thread only: admission, step plans, finish rule
  std::unique_ptr<Speculator> spec_;              // loop thread only: drafts and their checks
  std::thread thread_;
};

}  // namespace zaya
