#pragma once
// Generation with the cached decoder (engine.h), for any number of requests
// with continuous batching: up to `max_batch` sequences run together; each
// step feeds one token per decoding sequence and, in the rest of the step's
// token budget, prompt chunks of newly admitted ones (chunked prefill). When a
// sequence stops (a stop id, its token limit, the context end, or the caller)
// its slot takes the next waiting request. The admission, the step plan and
// the finish rule are BatchScheduler's (batch_scheduler.h), shared with zaya
// serve's loop (serving_loop.h).
//
// Each request samples from its own counter-based generator seeded by its
// sampling seed, the same stream the full-sequence generator uses
// (full_sequence.h), so a request's text does not depend on what it was
// batched with, and the two generators agree token for token.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zaya/infer/infer_model.h"
#include "zaya/infer/sampling.h"
#include "zaya/infer/spec_decode.h"

namespace zaya {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // at least one token (usually BOS first)
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these (it is kept in the output)
  // The LoRA adapter this sequence decodes with, unmerged (StepChunk::lora; a
  // server's --lora NAME=DIR); null: the model's own (InferModel::lora()).
  std::shared_ptr<const LoraAdapters> lora;
};

enum class FinishReason { kStop, kLength, kContext, kCancelled };
const char* finish_reason_name(FinishReason r);

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, prompt excluded
  FinishReason finish = FinishReason::kLength;
  // With GeneratorOptions::logprobs: log p of each generated token under the
  // model's own distribution (before temperature, top-k and top-p), the
  // trainer's log-softmax (ops/cross_entropy.h cross_entropy_row) on the
  // decoder's logits (RL rollouts, rl/).
  std::vector<float> logprobs;
  // With GeneratorOptions::routing: the experts the decoder's routers chose for
  // each token it fed (the prompt, then every generated token but one that
  // ended the sequence), [fed tokens, MoE blocks, top_k] (ops/routing.h; RL
  // routing replay, docs/rl.md).
  std::vector<int32_t> routing;
};

struct GeneratorOptions {
  int64_t max_batch = 1;         // sequences decoded together
  int64_t max_context = 0;       // 0: the longest prompt + max_new_tokens, capped at max_position_embeddings
  int64_t step_tokens = 256;     // tokens per forward step (prefill chunk size)
  int64_t sample_vocab = 0;      // ids >= this are never sampled; 0: the config's real vocabulary
  bool bf16_activations = true;  // see EngineOptions
  SpecOptions spec;              // speculative decoding (spec_decode.h); off by default
  bool logprobs = false;         // fill GenerationResult::logprobs
  bool routing = false;          // fill GenerationResult::routing (not with speculative decoding)
  // Requests with one prompt (and LoRA adapter) admitted while the first of
  // them is prefilling it share that prefill: each later one waits in its slot,
  // then becomes a copy of the first (KV pages shared by reference, the small
  // state copied: InferenceEngine::copy) and samples its first token from the
  // same last prompt logits with its own generator. Its tokens, log-probs and
  // routing records are those it would get prefilling the prompt in the
  // leader's step: where the engine's prefill does not depend on what else a
  // step holds (the test widths, generator_fork_test.cc) they equal an
  // unforked run's bit for bit; at wider ones (`tiny`) the log-probs may differ
  // in the last bits, as an unforked run's do between batchings (docs/rl.md,
  // Speed). Not with speculative decoding (a draft model's cache is not forked).
  bool share_prompts = true;
};

struct GenerationStats {
  int64_t requests = 0;
  int64_t prompt_tokens = 0;         // prompt tokens prefilled
  int64_t shared_prompt_tokens = 0;  // prompt tokens of requests that forked from another's (share_prompts)
  int64_t generated_tokens = 0;
  int64_t steps = 0;
  int64_t decode_steps = 0;        // steps without prompt tokens
  int64_t decode_tokens = 0;       // tokens those steps produced
  double prefill_seconds = 0;      // steps that carried prompt tokens
  double decode_seconds = 0;       // steps that did not
  double draft_seconds = 0;        // of decode_seconds: drafting (a draft model's steps; an n-gram lookup)
  double first_token_seconds = 0;  // from the start to the first sampled token
  double total_seconds = 0;
  int64_t context = 0;  // the context limit: positions each sequence's cache holds (FinishReason::kContext)
  SpecCounts spec;      // speculative decoding: drafts checked, tokens drafted and kept

  // Rates for reports; 0 when nothing of the kind was timed.
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0; }
  double decode_ms_per_step() const { return decode_steps > 0 ? 1e3 * decode_seconds / double(decode_steps) : 0; }
  double decode_tokens_per_second() const { return decode_seconds > 0 ? double(decode_tokens) / decode_seconds : 0; }
};

// Called with (request index, token) as each token is chosen; return false to
// stop that request (FinishReason::kCancelled).
using TokenCallback = std::function<bool(size_t, int32_t)>;
// Called once per request when it finishes.
using FinishCallback = std::function<void(size_t, const GenerationResult&)>;

// Why `request` cannot run on a model of config `c` under a context cap of
// `max_context` tokens (0: none; GeneratorOptions::max_context), or "" when
// it can: an empty prompt, a negative token limit, an invalid sampling
// setting, a prompt id outside the vocabulary, or a prompt that leaves no
// room to generate under max_position_embeddings or the cap.
std::string generation_request_error(const GenerationRequest& request, const ZayaConfig& c, int64_t max_context = 0);

// Fails naming the request ("request i: ...") when any cannot run (above).
std::vector<GenerationResult> generate(const InferModel& model, const std::vector<GenerationRequest>& requests,
                                       const GeneratorOptions& options, const TokenCallback& on_token = {},
                                       const FinishCallback& on_finish = {}, GenerationStats* stats = nullptr);

class InferenceEngine;

// generate() for a caller that generates again and again with one shape
// (RL rollouts, rl/rollout.h): the engine (its KV pool, decode state and step
// workspace) and the logit rows are kept between calls and reused when a
// call's engine options (batch, context, step tokens, ...) are the last
// call's and its model has the same architecture (InferenceEngine::rebind:
// the weights may be others, e.g. updated; each call reads those it is
// given). Building them again each call costs their construction and, worse,
// the page faults of memory the kernel must hand out again. A call's results
// are those of generate() with the same arguments, bit for bit
// (generator_test.cc).
class Generator {
 public:
  Generator();
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  std::vector<GenerationResult> run(const InferModel& model, const std::vector<GenerationRequest>& requests,
                                    const GeneratorOptions& options, const TokenCallback& on_token = {},
                                    const FinishCallback& on_finish = {}, GenerationStats* stats = nullptr);
  // Engines built so far (a test's view of the reuse).
  int64_t engines_built() const { return engines_built_; }

 private:
  std::unique_ptr<InferenceEngine> engine_;
  std::vector<float> logits_;
  // A step's rows sampled together (sample_tokens), reused.
  std::vector<const float*> row_logits_;
  std::vector<const SamplingOptions*> row_options_;
  std::vector<Rng*> row_rngs_;
  std::vector<int32_t> row_tokens_;
  SamplingScratch sample_scratch_;
  int64_t engines_built_ = 0;
};

}  // namespace zaya
