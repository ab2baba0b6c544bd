// openai_text_requests (openai_request.h): a checked request becomes the
// serving loop's text requests. Apart from the parser so that the parser
// alone (no tokenizer, no model) can be fuzzed (fuzz/fuzz_openai_request.cc).
#include <fmt/format.h>

#include <algorithm>

#include "zaya/serve/openai_request.h"

namespace zaya {

ChatOptions chat_options(const OpenAiRequest& r, const ApiLimits& limits) {
  ChatOptions o;
  o.format = limits.chat_format;
  o.enable_thinking = r.enable_thinking;
  if (r.tool_choice.kind != ToolChoice::Kind::kNone) o.tools = r.tools;
  if (r.tool_choice.kind == ToolChoice::Kind::kRequired) o.forced_tool = "";
  if (r.tool_choice.kind == ToolChoice::Kind::kNamed) o.forced_tool = r.tool_choice.name;
  return o;
}

std::vector<TextRequest> openai_text_requests(OpenAiRequest& r, const Tokenizer& tok, const ZayaConfig& c,
                                              int64_t context, const ApiLimits& limits) {
  TextRequest t;
  t.stop_strings = r.stop;
  t.ignore_eos = r.ignore_eos;
  t.generation.stop_ids = default_stop_ids(tok, c);
  t.generation.sampling.temperature = r.temperature;
  t.generation.sampling.top_p = r.top_p;
  t.generation.sampling.top_k = r.top_k;
  t.generation.sampling.seed = r.seed;
  const int64_t want = r.max_tokens >= 0                  ? r.max_tokens
                       : r.endpoint == ApiEndpoint::kChat ? limits.default_max_tokens
                                                          : 16;
  // Each prompt's n choices, in prompt order (choice prompt_index * n + i); a prompt that cannot run names itself.
  std::vector<TextRequest> out;
  const size_t prompts = r.endpoint == ApiEndpoint::kChat ? 1 : r.prompts.size();
  for (size_t p = 0; p < prompts; ++p) {
    std::string param = "prompt", at = prompts > 1 ? fmt::format("prompt[{}]", p) : "prompt";
    if (r.endpoint == ApiEndpoint::kChat) {
      param = at = "messages";
      const ChatOptions chat = chat_options(r, limits);
      const ChatEncoding e = encode_chat(tok, r.messages, true, chat);
      t.prompt = render_chat(r.messages, true, chat);
      t.generation.prompt = e.ids;
      const ChatStop stop = chat_stop(tok, chat.format);
      for (int32_t id : stop.ids)
        if (std::find(t.generation.stop_ids.begin(), t.generation.stop_ids.end(), id) == t.generation.stop_ids.end())
          t.generation.stop_ids.push_back(id);
      for (const std::string& s : stop.strings) t.stop_strings.push_back(s);
    } else if (r.prompts[p].is_ids) {
      t.generation.prompt = r.prompts[p].ids;
      // The model's vocabulary can be wider than the tokenizer's (padding ids): decode only the tokenizer's ids.
      const auto& ids = r.prompts[p].ids;
      for (size_t k = 0; k < ids.size(); ++k)
        if (ids[k] >= tok.vocab_size()) {
          r.error = fmt::format("'{}': prompt token {} at position {} is outside the tokenizer's vocabulary 0..{}", at,
                                ids[k], k, tok.vocab_size() - 1);
          r.error_param = param;
          return {};
        }
      t.prompt = tok.decode(ids);
    } else {
      t.prompt = r.prompts[p].text;
      t.generation.prompt = encode_prompt(tok, t.prompt, true);
    }
    // ignore_eos: no stop id (EOS, the config's end ids, a chat's end of turn) ends it; only stop strings do.
    if (t.ignore_eos) t.generation.stop_ids.clear();
    const int64_t room = context - int64_t(t.generation.prompt.size());
    t.generation.max_new_tokens = std::max<int64_t>(0, std::min(want, room));
    std::string why = generation_request_error(t.generation, c, context);
    // Echoed logprobs score every prompt token over the real vocabulary (scorer.h).
    if (why.empty() && r.echo && r.top_logprobs >= 0)
      for (size_t k = 0; k < t.generation.prompt.size(); ++k)
        if (t.generation.prompt[k] >= c.real_vocab_size) {
          why =
              fmt::format("prompt token {} at position {} is outside the scored vocabulary 0..{} (echo with logprobs)",
                          t.generation.prompt[k], k, c.real_vocab_size - 1);
          break;
        }
    if (!why.empty()) {
      r.error = fmt::format("'{}': {}", at, why);
      r.error_param = param;
      return {};
    }
    for (TextRequest& q : repeat_with_seeds(t, r.n)) out.push_back(std::move(q));
  }
  return out;
}

}  // namespace zaya
