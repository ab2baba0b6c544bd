#include "zaya/serve/generation_writer.h"

#include <fmt/format.h>

#include "zaya/core/timer.h"

namespace zaya {
namespace {

// A whole response in the making gets a newline after this long without a write.
constexpr double kHeartbeatSeconds = 0.5;
// The test hook's pace: bytes of the scripted reply per generated token.
constexpr size_t kScriptedBytesPerToken = 5;

bool write(httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); }

}  // namespace

GenerationWriter::GenerationWriter(const Tokenizer& tok, ServerMetrics& metrics, const ServerOptions& o,
                                   const std::atomic<bool>& cutting, std::atomic<int64_t>& cut)
    : tok_(tok), metrics_(metrics), o_(o), cutting_(cutting), cut_(cut) {
  const ChatFormatSpec& s = chat_format_spec(o.api.chat_format);
  for (const char* m : {s.think_open, s.think_close, s.tool_call_open, s.tool_call_close})
    if (*m)
      if (const int32_t id = special_piece_id(tok, m); id >= 0 && tok.decode({id}).empty()) silent_markers_[id] = m;
}

// A chat event's text through its choice's parser: the new reasoning, content and calls.
ChatDelta GenerationWriter::chat_text(Generation& g, const ServeEvent& e) {
  const bool end = e.kind == ServeEvent::Kind::kFinish;
  std::string piece = e.text;
  if (g.scripted) {
    // The test hook (ServerOptions::test_replies): the scripted reply instead of the model's text,
    // a few bytes per generated token and the rest at the end.
    size_t& at = g.scripted_at[e.choice];
    const size_t n = end ? std::string::npos : kScriptedBytesPerToken;
    piece = at < g.scripted->size() ? g.scripted->substr(at, n) : "";
    at += piece.size();
  } else if (!end) {
    if (auto m = silent_markers_.find(e.token); m != silent_markers_.end()) piece += m->second;
  }
  ChatOutputParser& parser = g.parsers[e.choice];
  ChatDelta d = parser.feed(piece);
  if (end) {
    ChatDelta rest = parser.finish();
    d.reasoning += rest.reasoning;
    d.content += rest.content;
    d.tool_calls.insert(d.tool_calls.end(), rest.tool_calls.begin(), rest.tool_calls.end());
    d.warnings.insert(d.warnings.end(), rest.warnings.begin(), rest.warnings.end());
  }
  for (const std::string& w : d.warnings) {
    fmt::print(stderr, "zaya serve: warning: {} choice {}: {}\n", g.head.id, e.choice, w);
    std::fflush(stderr);
  }
  return d;
}

// Applies one event to the request; returns the logprobs entry of a token event (for a chunk)
// and, for chat, what the event added to the answer.
void GenerationWriter::apply(Generation& g, const ServeEvent& e, std::vector<TokenLogprob>* lp, ChatDelta* delta) {
  ChoiceResult& c = g.choices[e.choice];
  if (e.kind == ServeEvent::Kind::kError) {
    g.failed = true;
    g.error = e.text;
    if (++g.finished > g.choices.size()) g.finished = g.choices.size();
    return;
  }
  if (g.parsers.empty()) {
    c.text += e.text;
  } else {
    ChatDelta d = chat_text(g, e);
    c.text += d.content;
    c.reasoning += d.reasoning;
    c.tool_calls.insert(c.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
    if (delta) *delta = std::move(d);
  }
  if (e.kind == ServeEvent::Kind::kFinish) {
    c.finish = e.finish;
    c.tokens = e.tokens;
    c.spec = e.spec;
    ++g.finished;
    // A sequence the client did not cancel (nobody reads those) was cut: by the deadline or the shutdown.
    if (e.finish == FinishReason::kCancelled && !g.failed) cut_short(g);
    return;
  }
  if (!g.first_token_seen) {
    metrics_.first_token(e.time - g.arrival);
    g.first_token_seen = true;
  }
  if (g.last_token[e.choice] > 0) metrics_.inter_token(e.time - g.last_token[e.choice]);
  g.last_token[e.choice] = e.time;
  ++c.tokens;
  if (g.head.logprobs) {
    TokenLogprob t{tok_.decode({e.token}), e.logprob, {}};
    for (const auto& [id, l] : e.top) t.top.emplace_back(tok_.decode({id}), l);
    c.logprobs.push_back(t);
    if (lp) lp->push_back(std::move(t));
  }
}

// Reports the request as failed: never as a success with a truncated text.
void GenerationWriter::cut_short(Generation& g) {
  g.failed = true;
  if (g.timed_out) {
    g.error = fmt::format("the request ran past --request-timeout ({} s) and was ended; its partial output is dropped",
                          o_.request_timeout);
    g.error_code = "request_timeout";
    return;
  }
  g.error = fmt::format(
      "the server shut down before this request finished (--shutdown-grace {} s); its partial output is dropped",
      o_.shutdown_grace);
  g.error_code = "server_shutdown";
  if (cutting_) ++cut_;
}

ojson GenerationWriter::failure(const Generation& g) const {
  ojson e = api_error(g.error, "server_error");
  if (!g.error_code.empty()) e["error"]["code"] = g.error_code;
  return e;
}

// Waits for events (up to a heartbeat); ends the request's sequences at its deadline.
bool GenerationWriter::next_events(Generation& g, std::vector<ServeEvent>& events) {
  events.clear();
  if (!g.timed_out && now_seconds() > g.deadline) {
    g.timed_out = true;
    g.channel->cancel();
  }
  return g.channel->wait(events, kHeartbeatSeconds / 2);
}

bool GenerationWriter::whole(Generation& g, httplib::DataSink& sink) {
  std::vector<ServeEvent> events;
  double last_write = now_seconds();
  while (g.finished < g.choices.size()) {
    if (next_events(g, events))
      for (const ServeEvent& e : events) apply(g, e, nullptr, nullptr);
    if (g.finished < g.choices.size() && now_seconds() - last_write >= kHeartbeatSeconds) {
      if (!write(sink, "\n")) return false;  // the client is gone: the releaser cancels
      last_write = now_seconds();
    }
  }
  const ojson body = g.failed ? failure(g) : api_response(g.head, g.choices, g.prompt_tokens);
  if (!write(sink, dump_api(body) + "\n")) return false;
  sink.done();
  return true;
}

bool GenerationWriter::stream(Generation& g, httplib::DataSink& sink) {
  auto send = [&](const ojson& j) { return write(sink, "data: " + dump_api(j) + "\n\n"); };
  if (g.head.chat)
    for (size_t i = 0; i < g.choices.size(); ++i)
      if (!send(api_chunk(g.head, i, "", true, {}, nullptr))) return false;
  std::vector<ServeEvent> events;
  while (g.finished < g.choices.size()) {
    if (!next_events(g, events)) continue;
    for (const ServeEvent& e : events) {
      std::vector<TokenLogprob> lp;
      ChatDelta delta;
      apply(g, e, &lp, &delta);
      if (g.failed) {
        // An error event and no [DONE]: a stream that ends without it is one that failed.
        if (!send(failure(g))) return false;
        sink.done();
        return true;
      }
      const bool end = e.kind == ServeEvent::Kind::kFinish;
      const FinishReason* why = end ? &g.choices[e.choice].finish : nullptr;
      if (!g.parsers.empty()) {
        if (!end && delta.empty() && lp.empty()) continue;
        const bool called = !g.choices[e.choice].tool_calls.empty();
        if (!send(api_chat_chunk(g.head, e.choice, delta, lp, why, called))) return false;
        continue;
      }
      if (!end && e.text.empty() && lp.empty()) continue;
      if (!send(api_chunk(g.head, e.choice, e.text, false, lp, why))) return false;
    }
  }
  if (g.include_usage) {
    int64_t generated = 0;
    SpecCounts spec;
    for (const ChoiceResult& c : g.choices) {
      generated += c.tokens;
      spec.add(c.spec);
    }
    if (!send(api_usage_chunk(g.head, g.prompt_tokens, generated, spec))) return false;
  }
  if (!write(sink, "data: [DONE]\n\n")) return false;
  sink.done();
  return true;
}

}  // namespace zaya
