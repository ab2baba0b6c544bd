#pragma once
// How one generating request reaches its client: the serving loop's events
// (infer/serving_loop.h) applied to the request's choices, then written as
// one JSON body (with a newline heartbeat while it waits, so proxies and the
// --io-timeout of a client see a live connection) or as server-sent events.
// A request the server ended itself (--request-timeout, or the end of the
// --shutdown-grace after SIGTERM) is reported as failed, never as a success
// with a truncated text: an error body with a code, or an error event and no
// "data: [DONE]" (docs/serve.md, "Security and limits").

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/serving_loop.h"
#include "zaya/serve/api_server.h"
#include "zaya/serve/chat_output.h"
#include "zaya/serve/metrics.h"
#include "zaya/serve/openai_response.h"

namespace zaya {

// One generating request: its head, its choices as they grow, and its timing.
struct Generation {
  ResponseHead head;
  std::shared_ptr<ServeChannel> channel;
  int64_t prompt_tokens = 0;
  bool stream = false, include_usage = false;
  double arrival = 0, deadline = 0;
  std::vector<ChoiceResult> choices;
  std::vector<ChatOutputParser> parsers;  // chat: one per choice (chat_output.h)
  const std::string* scripted = nullptr;  // ServerOptions::test_replies' reply for this request (a test hook)
  std::vector<size_t> scripted_at;        // how much of it each choice has had
  std::vector<double> last_token;         // per choice: when its last token came (0: none yet)
  size_t finished = 0;
  bool first_token_seen = false, timed_out = false, failed = false;
  std::string error, error_code;
};

class GenerationWriter {
 public:
  // `cutting` is set once the shutdown's grace is over; each request it cuts adds one to `cut`.
  GenerationWriter(const Tokenizer& tok, ServerMetrics& metrics, const ServerOptions& o,
                   const std::atomic<bool>& cutting, std::atomic<int64_t>& cut);

  // Each writes the whole answer; false when the client went away (the caller cancels).
  bool whole(Generation& g, httplib::DataSink& sink);
  bool stream(Generation& g, httplib::DataSink& sink);

 private:
  void apply(Generation& g, const ServeEvent& e, std::vector<TokenLogprob>* lp, ChatDelta* delta);
  ChatDelta chat_text(Generation& g, const ServeEvent& e);
  void cut_short(Generation& g);
  ojson failure(const Generation& g) const;
  bool next_events(Generation& g, std::vector<ServeEvent>& events);

  const Tokenizer& tok_;
  ServerMetrics& metrics_;
  const ServerOptions& o_;
  const std::atomic<bool>& cutting_;
  std::atomic<int64_t>& cut_;
  // Marker ids of the chat format that decode to no text (control pieces): their marker text is given
  // to the chat parser, which reads the markers (a tool call's tags) from the text.
  std::unordered_map<int32_t, std::string> silent_markers_;
};

}  // namespace zaya
