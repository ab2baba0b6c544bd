#pragma once
// Text generation for a batch of text requests (text_request.h) over the
// cached decoder's continuous batching (generator.h), or over the
// full-sequence reference (full_sequence.h): each request's completion is
// decoded as its tokens arrive, cut at its own stop ids and stop strings
// (completion_text.h), and handed out piece by piece as it becomes final, then
// whole when the request ends. The same calls serve zaya generate and any
// other front end that streams one request's text to its own client.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/text_request.h"
#include "zaya/model/model.h"

namespace zaya {

struct TextCompletion {
  std::string text;             // stop ids left out, cut before the first stop string
  std::vector<int32_t> tokens;  // generated ids, with the stop id or the token that completed a stop string
  FinishReason finish = FinishReason::kLength;  // kStop for a stop id and for a stop string
};

struct TextCallbacks {
  // (request, piece): text as it becomes final, never empty; a request's
  // pieces, in order, make its TextCompletion::text, and none comes after its
  // on_finish.
  std::function<void(size_t, std::string_view)> on_text;
  // (request, completion): once per request, as it ends (not in request order).
  std::function<void(size_t, const TextCompletion&)> on_finish;
};

// Runs every request (their prompt ids set) with the cached decoder; returns
// the completions in request order.
std::vector<TextCompletion> generate_text(const InferModel& model, const Tokenizer& tokenizer,
                                          const std::vector<TextRequest>& requests, const GeneratorOptions& options,
                                          const TextCallbacks& callbacks = {}, GenerationStats* stats = nullptr);

// One request by full-sequence forward passes: the reference path, token for
// token the cached decoder's result (its sampling stream is the same).
TextCompletion generate_text_full_sequence(const ZayaModel& model, const Tokenizer& tokenizer,
                                           const TextRequest& request, const TextCallbacks& callbacks = {});

// Hands completions on in request order, each as soon as it and every request
// before it have finished (continuous batching finishes them out of order).
class InOrderCompletions {
 public:
  using Emit = std::function<void(size_t, const TextCompletion&)>;
  InOrderCompletions(size_t requests, Emit emit);
  void finished(size_t request, TextCompletion completion);
  // Requests handed on so far.
  size_t emitted() const { return next_; }

 private:
  std::vector<std::optional<TextCompletion>> done_;
  size_t next_ = 0;
  Emit emit_;
};

}  // namespace zaya
