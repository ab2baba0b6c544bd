#include "zaya/serve/api_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <mutex>
#include <thread>

#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/serve/metrics.h"
#include "zaya/serve/openai_response.h"
#include "zaya/serve/prompt_echo.h"

namespace zaya {
namespace {

// A whole response in the making gets a newline after this long without a write.
constexpr double kHeartbeatSeconds = 0.5;

void send_json(httplib::Response& res, int status, const ojson& j) {
  res.status = status;
  res.set_content(dump_api(j) + "\n", "application/json");
}

std::atomic<bool> g_stop_signal{false};
void on_stop_signal(int) { g_stop_signal = true; }

}  // namespace

void ServerOptions::validate() const {
  ZAYA_CHECK_USAGE(port >= 0 && port <= 65535, "--port {} is invalid; allowed: 0 (any free port) .. 65535", port);
  ZAYA_CHECK_USAGE(max_concurrent >= 1, "--max-concurrent {} is invalid; allowed: >= 1", max_concurrent);
  ZAYA_CHECK_USAGE(max_body_bytes >= 1024, "--max-body-bytes {} is invalid; allowed: >= 1024", max_body_bytes);
  ZAYA_CHECK_USAGE(request_timeout > 0, "--request-timeout {} is invalid; allowed: > 0 seconds", request_timeout);
  ZAYA_CHECK_USAGE(io_timeout > 0, "--io-timeout {} is invalid; allowed: > 0 seconds", io_timeout);
}

struct ApiServer::Impl {
  // One generating request: its head, its choices as they grow, and its timing
  // (a member type, outside the anonymous namespace: generate()'s lambdas
  // capture it, which GCC rejects from a unity batch, -Wsubobject-linkage).
  struct Generation {
    ResponseHead head;
    std::shared_ptr<ServeChannel> channel;
    int64_t prompt_tokens = 0;
    bool stream = false, include_usage = false;
    double arrival = 0, deadline = 0;
    std::vector<ChoiceResult> choices;
    std::vector<double> last_token;  // per choice: when its last token came (0: none yet)
    size_t finished = 0;
    bool first_token_seen = false, timed_out = false, failed = false;
    std::string error;
  };

  const InferModel& model;
  const Tokenizer& tok;
  ServerOptions o;
  ServingLoop loop;
  ServerMetrics metrics;
  httplib::Server http;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> next_id{0};
  std::mutex echo_mu;
  int port = -1;
  int64_t started = 0;

  Impl(const InferModel& m, const Tokenizer& t, const ServerOptions& opt)
      : model(m), tok(t), o(opt), loop(m, t, opt.serving), started(int64_t(std::time(nullptr))) {
    routes();
  }

  bool authorized(const httplib::Request& req) const {
    return o.api_key.empty() || req.get_header_value("Authorization") == "Bearer " + o.api_key;
  }

  void error(httplib::Response& res, const std::string& path, int status, const std::string& message,
             const std::string& type, const std::string& param = "") {
    send_json(res, status, api_error(message, type, param));
    metrics.request(path, status);
  }

  void routes() {
    http.new_task_queue = [n = size_t(o.max_concurrent) + 8] { return new httplib::ThreadPool(n); };
    http.set_payload_max_length(size_t(o.max_body_bytes));
    const auto sec = [](double s) { return std::pair<time_t, time_t>{time_t(s), time_t((s - time_t(s)) * 1e6)}; };
    http.set_read_timeout(sec(o.io_timeout).first, sec(o.io_timeout).second);
    http.set_write_timeout(sec(o.io_timeout).first, sec(o.io_timeout).second);
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"status", "ok"}});
      metrics.request("/health", 200);
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      const ServingCounters n = loop.counters();
      MetricsGauges g{in_flight.load(), n.running,           n.waiting,          n.prefill_tokens,
                      n.steps,          n.prefix_hit_tokens, n.prefix_snapshots, n.prefix_evictions,
                      n.kv_pages,       n.kv_pages_used,     n.kv_pages_reserved};
      res.set_content(metrics.render(g), "text/plain; version=0.0.4; charset=utf-8");
      metrics.request("/metrics", 200);
    });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) return unauthorized(res, "/v1/models");
      send_json(res, 200, api_models(o.model_name, started));
      metrics.request("/v1/models", 200);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(req, res, ApiEndpoint::kCompletions, "/v1/completions");
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(req, res, ApiEndpoint::kChat, "/v1/chat/completions");
    });
    // Statuses httplib sets itself (404, 413, ...) get an OpenAI error body.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message = fmt::format("{} {}: HTTP status {}", req.method, req.path, res.status);
      if (res.status == 413)
        message = fmt::format("the request body is larger than --max-body-bytes ({} bytes)", o.max_body_bytes);
      if (res.status == 404)
        message = fmt::format(
            "{} {} is not an endpoint of this server; it serves POST /v1/completions, POST "
            "/v1/chat/completions, GET /v1/models, GET /health, GET /metrics",
            req.method, req.path);
      send_json(res, res.status, api_error(message, "invalid_request_error"));
      metrics.request(req.path, res.status);
    });
    http.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        message = e.what();
      } catch (...) {
      }
      error(res, req.path, 500, message, "server_error");
    });
  }

  void unauthorized(httplib::Response& res, const std::string& path) {
    send_json(res, 401,
              {{"error",
                {{"message", "invalid or missing API key: send the header \"Authorization: Bearer KEY\""},
                 {"type", "invalid_request_error"},
                 {"param", nullptr},
                 {"code", "invalid_api_key"}}}});
    metrics.request(path, 401);
  }

  void generate(const httplib::Request& req, httplib::Response& res, ApiEndpoint endpoint, const std::string& path) {
    const double arrival = now_seconds();
    if (!authorized(req)) return unauthorized(res, path);
    OpenAiRequest r = parse_openai_request(req.body, endpoint, o.api);
    std::vector<TextRequest> texts;
    if (r.error.empty()) texts = openai_text_requests(r, tok, model.config(), loop.context(), o.api);
    if (!r.error.empty()) return error(res, path, 400, r.error, "invalid_request_error", r.error_param);
    std::vector<ChoiceResult> echoed = echo(r, texts);
    if (in_flight.fetch_add(1) >= o.max_concurrent) {
      --in_flight;
      return error(
          res, path, 429,
          fmt::format("too many requests: {} are generating (--max-concurrent); retry later", o.max_concurrent),
          "rate_limit_exceeded");
    }
    auto g = std::make_shared<Generation>();
    for (const TextRequest& t : texts) g->prompt_tokens += int64_t(t.generation.prompt.size());
    const size_t choices = texts.size();  // n per prompt
    g->channel = loop.submit(std::move(texts), r.top_logprobs);
    if (!g->channel) {
      --in_flight;
      return error(res, path, 503, "the server is busy: its queue of waiting sequences is full; retry later",
                   "server_error");
    }
    const bool chat = endpoint == ApiEndpoint::kChat;
    g->head = {fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++), int64_t(std::time(nullptr)), o.model_name,
               chat, r.top_logprobs >= 0};
    g->stream = r.stream;
    g->include_usage = r.include_usage;
    g->arrival = arrival;
    g->deadline = arrival + o.request_timeout;
    g->choices = echoed.empty() ? std::vector<ChoiceResult>(choices) : std::move(echoed);
    g->last_token.assign(choices, 0.0);
    metrics.request(path, 200);
    auto provider = [this, g](size_t, httplib::DataSink& sink) {
      return g->stream ? stream(*g, sink) : whole(*g, sink);
    };
    auto release = [this, g](bool) {
      if (g->finished < g->choices.size()) {
        g->channel->cancel();
        metrics.cancelled();
      }
      int64_t generated = 0;
      for (const ChoiceResult& c : g->choices) generated += c.tokens;
      metrics.tokens(g->prompt_tokens, generated);
      --in_flight;
    };
    if (r.stream) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(r.stream ? "text/event-stream" : "application/json", provider, release);
  }

  // The prompt (and its logprobs) each choice starts with, for "echo"
  // (prompt_echo.h); none without. Scoring runs one at a time: each pass
  // holds a KV cache of its own beside the serving loop's.
  std::vector<ChoiceResult> echo(const OpenAiRequest& r, const std::vector<TextRequest>& texts) {
    if (!r.echo) return {};
    ScorerOptions so;
    so.step_tokens = o.serving.step_tokens;
    so.bf16_activations = o.serving.bf16_activations;
    so.score_vocab = o.serving.sample_vocab;
    std::lock_guard<std::mutex> lock(echo_mu);
    return echo_choices(model, tok, texts, r.n, r.top_logprobs, so);
  }

  // Applies one event to the request; returns the logprobs entry of a token event (for a chunk).
  void apply(Generation& g, const ServeEvent& e, std::vector<TokenLogprob>* lp) {
    ChoiceResult& c = g.choices[e.choice];
    if (e.kind == ServeEvent::Kind::kError) {
      g.failed = true;
      g.error = e.text;
      if (++g.finished > g.choices.size()) g.finished = g.choices.size();
      return;
    }
    c.text += e.text;
    if (e.kind == ServeEvent::Kind::kFinish) {
      c.finish = e.finish == FinishReason::kCancelled ? FinishReason::kLength : e.finish;
      c.tokens = e.tokens;
      ++g.finished;
      return;
    }
    if (!g.first_token_seen) {
      metrics.first_token(e.time - g.arrival);
      g.first_token_seen = true;
    }
    if (g.last_token[e.choice] > 0) metrics.inter_token(e.time - g.last_token[e.choice]);
    g.last_token[e.choice] = e.time;
    ++c.tokens;
    if (g.head.logprobs) {
      TokenLogprob t{tok.decode({e.token}), e.logprob, {}};
      for (const auto& [id, l] : e.top) t.top.emplace_back(tok.decode({id}), l);
      c.logprobs.push_back(t);
      if (lp) lp->push_back(std::move(t));
    }
  }

  // Waits for events (up to a heartbeat); ends the request's sequences at its deadline.
  bool next_events(Generation& g, std::vector<ServeEvent>& events) {
    events.clear();
    if (!g.timed_out && now_seconds() > g.deadline) {
      g.timed_out = true;
      g.channel->cancel();
    }
    return g.channel->wait(events, kHeartbeatSeconds / 2);
  }

  static bool write(httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); }

  bool whole(Generation& g, httplib::DataSink& sink) {
    std::vector<ServeEvent> events;
    double last_write = now_seconds();
    while (g.finished < g.choices.size()) {
      if (next_events(g, events))
        for (const ServeEvent& e : events) apply(g, e, nullptr);
      if (g.finished < g.choices.size() && now_seconds() - last_write >= kHeartbeatSeconds) {
        if (!write(sink, "\n")) return false;  // the client is gone: the releaser cancels
        last_write = now_seconds();
      }
    }
    const ojson body = g.failed ? api_error(g.error, "server_error") : api_response(g.head, g.choices, g.prompt_tokens);
    if (!write(sink, dump_api(body) + "\n")) return false;
    sink.done();
    return true;
  }

  bool stream(Generation& g, httplib::DataSink& sink) {
    auto send = [&](const ojson& j) { return write(sink, "data: " + dump_api(j) + "\n\n"); };
    if (g.head.chat)
      for (size_t i = 0; i < g.choices.size(); ++i)
        if (!send(api_chunk(g.head, i, "", true, {}, nullptr))) return false;
    std::vector<ServeEvent> events;
    while (g.finished < g.choices.size()) {
      if (!next_events(g, events)) continue;
      for (const ServeEvent& e : events) {
        std::vector<TokenLogprob> lp;
        apply(g, e, &lp);
        if (e.kind == ServeEvent::Kind::kError) {
          if (!send(api_error(e.text, "server_error"))) return false;
          g.finished = g.choices.size();
          break;
        }
        const bool end = e.kind == ServeEvent::Kind::kFinish;
        if (!end && e.text.empty() && lp.empty()) continue;
        const FinishReason* why = end ? &g.choices[e.choice].finish : nullptr;
        if (!send(api_chunk(g.head, e.choice, e.text, false, lp, why))) return false;
      }
    }
    if (g.include_usage) {
      int64_t generated = 0;
      for (const ChoiceResult& c : g.choices) generated += c.tokens;
      if (!send(api_usage_chunk(g.head, g.prompt_tokens, generated))) return false;
    }
    if (!write(sink, "data: [DONE]\n\n")) return false;
    sink.done();
    return true;
  }
};

ApiServer::ApiServer(const InferModel& model, const Tokenizer& tok, const ServerOptions& o) {
  o.validate();
  impl_ = std::make_unique<Impl>(model, tok, o);
}

ApiServer::~ApiServer() { stop(); }

void ApiServer::bind() {
  Impl& m = *impl_;
  if (m.o.port == 0)
    m.port = m.http.bind_to_any_port(m.o.host);
  else
    m.port = m.http.bind_to_port(m.o.host, m.o.port) ? m.o.port : -1;
  ZAYA_CHECK(m.port > 0, "cannot listen on {}:{} (--host, --port): the address is in use or not this machine's",
             m.o.host, m.o.port);
}

int ApiServer::port() const { return impl_->port; }

void ApiServer::run() {
  if (impl_->port < 0) bind();
  impl_->http.listen_after_bind();
}

void ApiServer::stop() {
  if (!impl_) return;
  impl_->http.stop();
  impl_->loop.stop();
}

void ApiServer::run_until_signal() {
  if (impl_->port < 0) bind();
  g_stop_signal = false;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::atomic<bool> ended{false};
  std::thread listener([this, &ended] {
    impl_->http.listen_after_bind();
    ended = true;
  });
  while (!g_stop_signal && !ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop();
  listener.join();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

ServingCounters ApiServer::counters() const { return impl_->loop.counters(); }

}  // namespace zaya
