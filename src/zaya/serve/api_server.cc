#include "zaya/serve/api_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>

#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/io/json_file.h"
#include "zaya/serve/generation_writer.h"
#include "zaya/serve/http_checks.h"
#include "zaya/serve/http_connection.h"
#include "zaya/serve/lora_registry.h"
#include "zaya/serve/metrics.h"
#include "zaya/serve/openai_response.h"
#include "zaya/serve/prompt_echo.h"
#include "zaya/serve/tokenizer_api.h"

namespace zaya {
namespace {

void send_json(httplib::Response& res, int status, const ojson& j) {
  res.status = status;
  res.set_content(dump_api(j) + "\n", "application/json");
  // OpenAI's clients wait this long before they retry a 429 or 503.
  if (status == 429 || status == 503) res.set_header("Retry-After", "1");
}

// SIGINT/SIGTERM received (the first starts the drain, a second ends its grace).
std::atomic<int> g_stop_signals{0};
void on_stop_signal(int) { g_stop_signals.fetch_add(1); }

// The routes, for the pre-routing check (405 and 404) and the metrics' endpoint label.
const std::vector<HttpRoute>& api_routes() {
  static const std::vector<HttpRoute> routes = {{"POST", "/v1/completions"},
                                                {"POST", "/v1/chat/completions"},
                                                {"GET", "/v1/models"},
                                                {"POST", "/tokenize"},
                                                {"POST", "/detokenize"},
                                                {"GET", "/tokenizer_info"},
                                                {"GET", "/health"},
                                                {"GET", "/metrics"},
                                                {"POST", "/v1/load_lora_adapter"},
                                                {"POST", "/v1/unload_lora_adapter"}};
  return routes;
}

std::vector<std::string> route_paths() {
  std::vector<std::string> paths;
  for (const HttpRoute& r : api_routes()) paths.push_back(r.path);
  return paths;
}

// "Authorization: Bearer KEY": the scheme case-insensitively (RFC 7235 section 2.1), the key compared
// in a time that depends only on its length (no early exit on the first differing byte).
bool bearer_matches(const std::string& header, const std::string& key) {
  static const std::string scheme = "bearer ";
  bool ok = header.size() == scheme.size() + key.size();
  for (size_t i = 0; i < scheme.size(); ++i)
    ok &= i < header.size() && std::tolower(static_cast<unsigned char>(header[i])) == scheme[i];
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    const size_t at = scheme.size() + i;
    diff |= static_cast<unsigned char>((at < header.size() ? header[at] : 0) ^ key[i]);
  }
  return ok && diff == 0;
}

}  // namespace

void ServerOptions::validate() const {
  ZAYA_CHECK_USAGE(port >= 0 && port <= 65535, "--port {} is invalid; allowed: 0 (any free port) .. 65535", port);
  ZAYA_CHECK_USAGE(max_concurrent >= 1, "--max-concurrent {} is invalid; allowed: >= 1", max_concurrent);
  ZAYA_CHECK_USAGE(max_body_bytes >= 1024, "--max-body-bytes {} is invalid; allowed: >= 1024", max_body_bytes);
  ZAYA_CHECK_USAGE(request_timeout > 0, "--request-timeout {} is invalid; allowed: > 0 seconds", request_timeout);
  ZAYA_CHECK_USAGE(io_timeout > 0, "--io-timeout {} is invalid; allowed: > 0 seconds", io_timeout);
  ZAYA_CHECK_USAGE(read_deadline > 0, "--read-deadline {} is invalid; allowed: > 0 seconds", read_deadline);
  ZAYA_CHECK_USAGE(shutdown_grace >= 0, "--shutdown-grace {} is invalid; allowed: >= 0 seconds", shutdown_grace);
  ZAYA_CHECK_USAGE(max_loras >= 1, "--max-loras {} is invalid; allowed: >= 1", max_loras);
  ZAYA_CHECK_USAGE(int64_t(loras.size()) <= max_loras, "{} --lora adapters are more than --max-loras {}", loras.size(),
                   max_loras);
  // The admin endpoints load files named by the client: never on an open server unless asked for by name.
  ZAYA_CHECK_USAGE(!lora_admin || !api_key.empty() || lora_admin_without_key,
                   "--lora-admin needs --api-key (the endpoints load files a client names); "
                   "--lora-admin-without-key runs them open, for a trusted network only");
}

struct ApiServer::Impl {
  const InferModel& model;
  const Tokenizer& tok;
  ServerOptions o;
  ServingLoop loop;
  ServerMetrics metrics{route_paths()};
  GuardedHttpServer http;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> draining{false};          // new requests get 503
  std::atomic<bool> cutting{false};           // the drain's grace is over: cancelled sequences were cut by it
  std::atomic<int64_t> cut{0};                // requests cut by the drain
  std::atomic<bool> watching_signals{false};  // in run_until_signal: a signal starts the drain
  std::atomic<int64_t> next_id{0};
  std::mutex echo_mu;
  SpecialTokenEncoder special_tokens{tok};
  LoraRegistry loras{model, o.model_name, o.max_loras, !o.loras.empty() || o.lora_admin};
  std::once_flag token_texts_once;  // response_format: the vocabulary's texts, made at its first use
  std::shared_ptr<const TokenTexts> token_texts;
  GenerationWriter writer{tok, metrics, o, cutting, cut};
  int port = -1;
  int64_t started = 0;

  Impl(const InferModel& m, const Tokenizer& t, const ServerOptions& opt)
      : model(m),
        tok(t),
        o(opt),
        loop(m, t, opt.serving),
        http(opt.read_deadline, opt.io_timeout),
        started(int64_t(std::time(nullptr))) {
    for (const auto& [name, dir] : o.loras) {
      const LoraRegistry::Outcome r = loras.load(name, dir);
      ZAYA_CHECK_USAGE(r.status == 200, "--lora {}={}: {}", name, dir, r.message);
    }
    routes();
  }

  bool authorized(const httplib::Request& req) const {
    return o.api_key.empty() || bearer_matches(req.get_header_value("Authorization"), o.api_key);
  }

  void error(httplib::Response& res, const std::string& path, int status, const std::string& message,
             const std::string& type, const std::string& param = "") {
    send_json(res, status, api_error(message, type, param));
    metrics.request(path, status);
  }

  // Refuses a request from its head alone, and closes the connection after
  // the answer (its body, if any, is not read).
  httplib::Server::HandlerResponse refuse(const httplib::Request& req, httplib::Response& res, const HttpRefusal& r) {
    error(res, req.path, r.status, r.message, r.status >= 500 ? "server_error" : "invalid_request_error");
    if (!r.allow.empty()) res.set_header("Allow", r.allow);
    res.set_header("Connection", "close");
    if (HttpRequestState* st = current_http_request()) st->close = true;
    return httplib::Server::HandlerResponse::Handled;
  }

  // Before the body is read: the head's framing, route and type, and the drain.
  httplib::Server::HandlerResponse check_head(const httplib::Request& req, httplib::Response& res) {
    if (HttpRequestState* st = current_http_request()) st->head_accepted = true;
    HttpRefusal r = check_body_framing(req, o.max_body_bytes);
    if (!r) r = check_route(req, api_routes());
    if (!r) r = check_json_content_type(req);
    // Read as the handler runs, so a request that comes after the signal is refused, not one poll later.
    if (!r && (draining || (watching_signals && g_stop_signals > 0)) && req.path != "/metrics")
      r = {503, "the server is shutting down and accepts no new requests; retry (another instance) later", {}};
    return r ? refuse(req, res, r) : httplib::Server::HandlerResponse::Unhandled;
  }

  // A POST body through a counting reader: httplib 0.11.4 checks --max-body-bytes
  // only against Content-Length, and would buffer a chunked body of any size.
  // `handle` gets the request with its body.
  using PostHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
  void post(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
            const PostHandler& handle) {
    httplib::Request with_body = req;  // generate() reads the body where httplib's plain handlers find it
    bool over = false;
    const bool read = reader([&](const char* data, size_t n) {
      over = with_body.body.size() + n > size_t(o.max_body_bytes);
      if (!over) with_body.body.append(data, n);
      return !over;
    });
    const HttpRequestState* st = current_http_request();
    if (over)
      refuse(req, res,
             {413, fmt::format("the request body is larger than --max-body-bytes ({} bytes)", o.max_body_bytes), {}});
    else if (!read && st && st->deadline_passed)
      refuse(req, res, {408, deadline_message(), {}});
    else if (!read)
      refuse(req, res, {400, "the request body could not be read (a malformed chunk, or the connection ended)", {}});
    else
      handle(with_body, res);
  }

  // Each POST route twice: httplib routes a POST with no body (Content-Length: 0) to the plain handlers.
  void post_route(const std::string& path, const PostHandler& handle) {
    http.Post(path, [this, handle](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) { post(req, res, reader, handle); });
    http.Post(path, handle);
  }

  std::string deadline_message() const {
    return fmt::format("the request's head and body did not arrive within --read-deadline ({} s)", o.read_deadline);
  }

  void routes() {
    http.new_task_queue = [n = size_t(o.max_concurrent) + 8] { return new httplib::ThreadPool(n); };
    http.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return check_head(req, res); });
    http.set_early_error_body([this](int status) {
      return dump_api(api_error(
          status == 408 ? deadline_message() : fmt::format("the request head is larger than {} bytes", kMaxHeadBytes),
          "invalid_request_error"));
    });
    http.set_payload_max_length(size_t(o.max_body_bytes));
    // A response is written in pieces (head, then body): with Nagle's algorithm a
    // keep-alive client (requests.Session, httpx) waited for its delayed ACK, about
    // 30 ms per request (lm-eval's remote tokenizer: 3 requests per item).
    http.set_tcp_nodelay(true);
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
      g.spec_drafts = n.spec_drafts;
      g.spec_drafted = n.spec_drafted_tokens;
      g.spec_accepted = n.spec_accepted_tokens;
      res.set_content(metrics.render(g), "text/plain; version=0.0.4; charset=utf-8");
      metrics.request("/metrics", 200);
    });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) return unauthorized(res, "/v1/models");
      send_json(res, 200, loras.models(started));
      metrics.request("/v1/models", 200);
    });
    for (const auto& [path, endpoint] : {std::pair{"/v1/completions", ApiEndpoint::kCompletions},
                                         std::pair{"/v1/chat/completions", ApiEndpoint::kChat}})
      post_route(path, [this, p = std::string(path), endpoint](const httplib::Request& req, httplib::Response& res) {
        generate(req, res, endpoint, p);
      });
    post_route("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
    for (const bool load : {true, false})
      post_route(load ? "/v1/load_lora_adapter" : "/v1/unload_lora_adapter",
                 [this, load](const httplib::Request& req, httplib::Response& res) { lora_admin(req, res, load); });
    post_route("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
    http.Get("/tokenizer_info", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) return unauthorized(res, "/tokenizer_info");
      send_json(res, 200, tokenizer_info(tok, loop.context()));
      metrics.request("/tokenizer_info", 200);
    });
    // Statuses httplib sets itself (a malformed head, 414, 408 and 431 from the connection) get a sentence.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      HttpRequestState* st = current_http_request();
      HttpRefusal r;
      if (st && st->deadline_passed)
        r = {408, deadline_message(), {}};
      else if (st && st->head_too_large)
        r = {431, fmt::format("the request head is larger than {} bytes", kMaxHeadBytes), {}};
      else if (st && st->head_accepted)
        r = {res.status, res.status == 400 ? "the request body could not be read" : "the request failed", {}};
      else
        r = malformed_head_refusal(req, res.status);
      if (st) st->close = true;
      send_json(res, r.status, api_error(r.message, r.status >= 500 ? "server_error" : "invalid_request_error"));
      metrics.request(req.path, r.status);
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

  // vLLM's runtime adapter endpoints (lora_registry.h): {"lora_name", "lora_path"} to load, {"lora_name"} to unload.
  void lora_admin(const httplib::Request& req, httplib::Response& res, bool load) {
    const std::string path = load ? "/v1/load_lora_adapter" : "/v1/unload_lora_adapter";
    if (!o.lora_admin)
      return error(res, path, 403,
                   "loading and unloading LoRA adapters at run time is off: start zaya serve with --lora-admin (and "
                   "--api-key)",
                   "invalid_request_error");
    if (!authorized(req)) return unauthorized(res, path);
    nlohmann::json j;
    try {
      j = parse_json(req.body, "the request body");  // nesting capped (io/json_file.h)
    } catch (const Error& e) {
      return error(res, path, 400, e.what(), "invalid_request_error");
    }
    if (!j.is_object())
      return error(res, path, 400, "the request body must be a JSON object: {\"lora_name\": ..., \"lora_path\": ...}",
                   "invalid_request_error");
    std::string field[2];
    const char* names[2] = {"lora_name", "lora_path"};
    for (int i = 0; i < (load ? 2 : 1); ++i) {
      if (!j.contains(names[i]) || !j[names[i]].is_string())
        return error(res, path, 400, fmt::format("'{}' is required, a string", names[i]), "invalid_request_error",
                     names[i]);
      field[i] = j[names[i]].get<std::string>();
    }
    const LoraRegistry::Outcome r = load ? loras.load(field[0], field[1]) : loras.unload(field[0]);
    if (r.status != 200) return error(res, path, r.status, r.message, "invalid_request_error", r.param);
    fmt::print(stderr, "zaya serve: LoRA adapter \"{}\" {}\n", field[0],
               load ? "loaded from " + field[1] : std::string("unloaded"));
    send_json(res, 200, {{"status", "ok"}, {"lora_name", field[0]}, {"loaded", load}});
    metrics.request(path, 200);
  }

  // The tokenizer endpoints (tokenizer_api.h).
  void tokenize(const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) return unauthorized(res, "/tokenize");
    const TokenizeRequest r = parse_tokenize_request(req.body);
    if (!r.error.empty()) return error(res, "/tokenize", 400, r.error, "invalid_request_error", r.error_param);
    send_json(res, 200, tokenize_response(tok, special_tokens, r, loop.context()));
    metrics.request("/tokenize", 200);
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) return unauthorized(res, "/detokenize");
    DetokenizeRequest r = parse_detokenize_request(req.body);
    if (r.error.empty() && !(r.error = detokenize_error(tok, r.tokens)).empty()) r.error_param = "tokens";
    if (!r.error.empty()) return error(res, "/detokenize", 400, r.error, "invalid_request_error", r.error_param);
    send_json(res, 200, detokenize_response(tok, r.tokens));
    metrics.request("/detokenize", 200);
  }

  // response_format: each text's sequences held to the grammar (token_constraint.h), one mask cache per request.
  void constrain(std::vector<TextRequest>& texts, const std::shared_ptr<const JsonGrammar>& grammar) {
    std::call_once(token_texts_once, [&] { token_texts = std::make_shared<const TokenTexts>(tok); });
    TokenConstraintFactory made;
    const std::vector<int32_t>* made_for = nullptr;
    for (TextRequest& t : texts) {
      if (!made_for || *made_for != t.generation.stop_ids)
        made = json_constraint(grammar, token_texts, t.generation.stop_ids), made_for = &t.generation.stop_ids;
      t.constraint = made;
    }
  }

  void generate(const httplib::Request& req, httplib::Response& res, ApiEndpoint endpoint, const std::string& path) {
    const double arrival = now_seconds();
    if (!authorized(req)) return unauthorized(res, path);
    OpenAiRequest r = parse_openai_request(req.body, endpoint, o.api);
    std::vector<TextRequest> texts;
    if (r.error.empty()) texts = openai_text_requests(r, tok, model.config(), loop.context(), o.api);
    if (r.error.empty() && r.response_grammar) constrain(texts, r.response_grammar);
    if (!r.error.empty()) return error(res, path, 400, r.error, "invalid_request_error", r.error_param);
    // The adapter "model" names (lora_registry.h), OpenAI's 404 for a model it does not serve.
    const LoraRegistry::Pick pick = loras.pick(r.model);
    if (!pick.error.empty()) {
      ojson e = api_error(pick.error, "invalid_request_error", "model");
      e["error"]["code"] = "model_not_found";
      send_json(res, 404, e);
      return metrics.request(path, 404);
    }
    if (pick.lora && r.echo)
      return error(res, path, 400,
                   fmt::format("'echo' scores the prompt with the base model only; ask \"{}\" for it, or leave it out "
                               "with the adapter \"{}\"",
                               o.model_name, pick.name),
                   "invalid_request_error", "echo");
    for (TextRequest& t : texts) t.generation.lora = pick.lora;
    if (int64_t(texts.size()) > o.serving.max_batch + o.serving.max_waiting)
      return error(res, path, 400,
                   fmt::format("'n' = {} for {} prompt(s) asks for {} sequences, more than this server can ever hold "
                               "at once: --batch {} + --max-queue {}",
                               r.n, texts.size() / size_t(std::max<int64_t>(r.n, 1)), texts.size(), o.serving.max_batch,
                               o.serving.max_waiting),
                   "invalid_request_error", "n");
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
    const int64_t number = next_id++;
    g->head = {fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", number), int64_t(std::time(nullptr)), pick.name, chat,
               r.top_logprobs >= 0};
    if (chat) {  // each choice's answer read into reasoning, content and tool calls (chat_output.h)
      const ChatOptions rendered = chat_options(r, o.api);
      for (size_t i = 0; i < choices; ++i)
        g->parsers.emplace_back(chat_output_options(rendered, fmt::format("call_{}_{}_", number, i)));
      g->scripted_at.assign(choices, 0);
      if (!o.test_replies.empty()) g->scripted = &o.test_replies[size_t(number) % o.test_replies.size()];
    }
    g->stream = r.stream;
    g->include_usage = r.include_usage;
    g->arrival = arrival;
    g->deadline = arrival + o.request_timeout;
    g->choices = echoed.empty() ? std::vector<ChoiceResult>(choices) : std::move(echoed);
    g->last_token.assign(choices, 0.0);
    metrics.request(path, 200);
    auto provider = [this, g](size_t, httplib::DataSink& sink) {
      return g->stream ? writer.stream(*g, sink) : writer.whole(*g, sink);
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
};

ApiServer::ApiServer(const InferModel& model, const Tokenizer& tok, const ServerOptions& o) {
  o.validate();
  impl_ = std::make_unique<Impl>(model, tok, o);
}

ApiServer::~ApiServer() { stop(); }

void ApiServer::bind() {
  Impl& m = *impl_;
  m.port = m.http.bind_listener(m.o.host, m.o.port);
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

int64_t ApiServer::drain(double grace_seconds) {
  Impl& m = *impl_;
  m.draining = true;
  const auto wait_idle = [&m](double seconds, bool second_signal_ends) {
    const double end = now_seconds() + seconds;
    while (m.in_flight > 0 && now_seconds() < end && !(second_signal_ends && m.watching_signals && g_stop_signals > 1))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  wait_idle(grace_seconds, true);
  m.cutting = true;
  m.loop.stop();                         // what still runs or waits ends cancelled, and its request reports the cut
  wait_idle(m.o.io_timeout + 1, false);  // for those answers to be written
  m.http.stop();
  return m.cut;
}

int64_t ApiServer::run_until_signal() {
  if (impl_->port < 0) bind();
  g_stop_signals = 0;
  impl_->watching_signals = true;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::atomic<bool> ended{false};
  std::thread listener([this, &ended] {
    impl_->http.listen_after_bind();
    ended = true;
  });
  // New requests see the signal at once (check_head reads it); this loop only starts the drain.
  while (g_stop_signals == 0 && !ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int64_t cut = drain(impl_->o.shutdown_grace);
  stop();
  listener.join();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  impl_->watching_signals = false;
  return cut;
}

int64_t ApiServer::context() const { return impl_->loop.context(); }

ServingCounters ApiServer::counters() const { return impl_->loop.counters(); }

}  // namespace zaya
