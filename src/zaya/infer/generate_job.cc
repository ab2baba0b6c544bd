#include "zaya/infer/generate_job.h"

#include <algorithm>

#include "zaya/core/error.h"
#include "zaya/infer/completion_text.h"
#include "zaya/infer/full_sequence.h"

namespace zaya {
namespace {

// Feeds one token to a request's text and passes on what became final.
void show(CompletionText& text, size_t i, int32_t id, const TextCallbacks& cb) {
  const std::string piece = text.push(id);
  if (!piece.empty() && cb.on_text) cb.on_text(i, piece);
}

// The rest of a request's text, and its completion.
TextCompletion complete(CompletionText& text, size_t i, std::vector<int32_t> tokens, FinishReason finish,
                        const TextCallbacks& cb) {
  const std::string rest = text.finish();
  if (!rest.empty() && cb.on_text) cb.on_text(i, rest);
  // A stop string ends the request through the token callback, which the
  // generator reports as a cancellation; to the caller it is a stop.
  return {text.text(), std::move(tokens), text.stopped() ? FinishReason::kStop : finish};
}

}  // namespace

std::vector<TextCompletion> generate_text(const InferModel& model, const Tokenizer& tok,
                                          const std::vector<TextRequest>& requests, const GeneratorOptions& options,
                                          const TextCallbacks& cb, GenerationStats* stats) {
  std::vector<GenerationRequest> generation;
  std::vector<CompletionText> texts;
  generation.reserve(requests.size());
  texts.reserve(requests.size());
  for (const TextRequest& r : requests) {
    generation.push_back(r.generation);
    texts.emplace_back(tok, r.generation.stop_ids, r.stop_strings);
  }
  std::vector<TextCompletion> out(requests.size());
  auto on_token = [&](size_t i, int32_t id) {
    show(texts[i], i, id, cb);
    return !texts[i].stopped();
  };
  auto on_finish = [&](size_t i, const GenerationResult& r) {
    out[i] = complete(texts[i], i, r.tokens, r.finish, cb);
    if (cb.on_finish) cb.on_finish(i, out[i]);
  };
  generate(model, generation, options, on_token, on_finish, stats);
  return out;
}

TextCompletion generate_text_full_sequence(const ZayaModel& model, const Tokenizer& tok, const TextRequest& request,
                                           const TextCallbacks& cb) {
  const GenerationRequest& r = request.generation;
  CompletionText text(tok, r.stop_ids, request.stop_strings);
  GenerateOptions g;
  g.max_new_tokens = r.max_new_tokens;
  g.sampling = r.sampling;
  g.stop_ids = r.stop_ids;
  std::vector<int32_t> tokens = generate_full_sequence(model, r.prompt, g, [&](int32_t id) {
    show(text, 0, id, cb);
    return !text.stopped();
  });
  FinishReason finish = FinishReason::kContext;
  if (!tokens.empty() && std::find(r.stop_ids.begin(), r.stop_ids.end(), tokens.back()) != r.stop_ids.end())
    finish = FinishReason::kStop;
  else if (int64_t(tokens.size()) >= r.max_new_tokens)
    finish = FinishReason::kLength;
  TextCompletion out = complete(text, 0, std::move(tokens), finish, cb);
  if (cb.on_finish) cb.on_finish(0, out);
  return out;
}

InOrderCompletions::InOrderCompletions(size_t requests, Emit emit) : done_(requests), emit_(std::move(emit)) {}

void InOrderCompletions::finished(size_t request, TextCompletion completion) {
  ZAYA_CHECK(request < done_.size() && request >= next_ && !done_[request],
             "request {} finished twice or is not one of the {} requests", request, done_.size());
  done_[request] = std::move(completion);
  while (next_ < done_.size() && done_[next_]) {
    emit_(next_, *done_[next_]);
    done_[next_].reset();  // handed on: no need to keep its text
    ++next_;
  }
}

}  // namespace zaya
