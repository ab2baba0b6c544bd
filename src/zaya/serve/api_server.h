#pragma once
// zaya serve: an OpenAI-compatible HTTP server (cpp-httplib) on the serving
// loop (infer/serving_loop.h). HTTP threads parse and check a request, queue
// its sequences and stream their events back; the loop's one thread owns the
// decoder, so concurrent requests share its batch (continuous batching).
//
//   POST /v1/completions, /v1/chat/completions   (openai_request.h; "stream": true as server-sent events)
//   GET  /v1/models, /health, /metrics           (metrics.h: Prometheus text)
//   POST /tokenize, /detokenize, GET /tokenizer_info   (tokenizer_api.h: vLLM's, for lm-evaluation-harness)
//   POST /v1/load_lora_adapter, /v1/unload_lora_adapter (vLLM's; lora_registry.h; only with --lora-admin)
//
// Limits: requests generating at once (429 beyond), the sequences the queue
// holds (503 beyond; 400 for a request that could never fit), the body size
// (413, chunked bodies too), the context (400 for a prompt that leaves no
// room), a time limit per request (then an error, not a truncated success),
// a deadline for a request's head and body (408) and read/write timeouts on
// the connection (http_connection.h); the head's framing, method, path and
// Content-Type are checked before the body is read (http_checks.h).
// Shutdown drains: new requests get 503, those in flight may finish within a
// grace period, and any cut at its end get an error (never "length" and
// [DONE]). A client that goes away cancels its
// request: a streamed one at the next chunk it cannot be sent, a whole one
// within a second (while it is generated the response, sent chunked, gets a
// newline every half second: JSON allows leading whitespace, and the write
// fails once the client is gone). With an API key, /v1/* needs
// "Authorization: Bearer KEY" (401 otherwise), and so do the tokenizer
// endpoints; /health and /metrics do not.
// Every error is OpenAI's {"error": {"message", "type", "param", "code"}}.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/serving_loop.h"
#include "zaya/serve/openai_request.h"

namespace zaya {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (port() tells which)
  std::string api_key;          // "": no key needed
  std::string model_name;       // the id /v1/models lists and responses carry
  int64_t max_concurrent = 64;  // requests generating at once
  int64_t max_body_bytes = 1 << 20;
  double request_timeout = 600;  // seconds one request may generate
  double io_timeout = 30;        // seconds a read or write on a connection may wait
  double read_deadline = 10;     // seconds for a request's head and body together
  double shutdown_grace = 20;    // seconds requests in flight may finish after SIGTERM
  ApiLimits api;
  ServingOptions serving;
  // A test hook (tests/e2e/serve_tools.py; set only from $ZAYA_SERVE_TEST_REPLIES, with a
  // note at start-up): chat request N's answer text is test_replies[N % size] instead of
  // the model's, handed out a few bytes per generated token and the rest at its end, so
  // the reasoning and tool-call paths (chat_output.h) run on known text through the real
  // server and clients. The model still runs (tokens, usage, logprobs are its own).
  std::vector<std::string> test_replies;
  // LoRA adapters served by name (--lora NAME=DIR; lora_registry.h): a request picks one by "model".
  std::vector<std::pair<std::string, std::string>> loras;
  int64_t max_loras = 16;               // adapters held at once (--max-loras)
  bool lora_admin = false;              // POST /v1/load_lora_adapter, /v1/unload_lora_adapter (--lora-admin)
  bool lora_admin_without_key = false;  // ... even with no API key (--lora-admin-without-key)
  void validate() const;
};

class ApiServer {
 public:
  ApiServer(const InferModel& model, const Tokenizer& tokenizer, const ServerOptions& options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds the listening socket; fails naming the address when it cannot.
  void bind();
  int port() const;
  // Tokens per sequence, prompt included (--max-context capped at the model's positions).
  int64_t context() const;
  // Serves until stop() (from another thread).
  void run();
  void stop();
  // Refuses new requests (503), lets those in flight finish for up to
  // `grace_seconds` (a second SIGINT/SIGTERM ends the wait), then ends the
  // rest with an error and stops. Returns how many requests were cut.
  int64_t drain(double grace_seconds);
  // Serves until SIGINT or SIGTERM, then drains for --shutdown-grace; returns drain()'s count.
  int64_t run_until_signal();

  ServingCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaya
