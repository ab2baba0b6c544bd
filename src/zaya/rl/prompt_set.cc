#include "zaya/rl/prompt_set.h"

#include "zaya/core/error.h"
#include "zaya/data/chat_template.h"
#include "zaya/io/json_file.h"
#include "zaya/rl/reward.h"

namespace zaya {
namespace {

std::vector<ChatMessage> record_messages(const nlohmann::json& m, const std::string& where) {
  ZAYA_CHECK(m.is_array(), "{}: \"messages\" is {}; allowed: an array of {{\"role\", \"content\"}} objects", where,
             json_preview(m));
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < m.size(); ++i) {
    const nlohmann::json& x = m[i];
    ZAYA_CHECK(x.is_object() && x.contains("role") && x["role"].is_string() && x.contains("content") &&
                   x["content"].is_string(),
               "{}: messages[{}] is {}; allowed: {{\"role\": string, \"content\": string}}", where, i, json_preview(x));
    out.push_back({x["role"].get<std::string>(), x["content"].get<std::string>()});
  }
  try {
    check_chat(out);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
  // The prompt of an RL sample ends before the model's turn: the last message is the user's.
  ZAYA_CHECK(out.back().role == "user",
             "{}: messages[{}].role is \"{}\"; allowed: a chat that ends with a \"user\" "
             "message (the model answers it)",
             where, out.size() - 1, out.back().role);
  return out;
}

}  // namespace

std::vector<RlPrompt> read_rl_prompts(const std::string& path, const Tokenizer& tok, const RlPromptRules& rules) {
  std::vector<RlPrompt> out;
  read_json_lines(path, [&](nlohmann::json&& j, const std::string& where) {
    ZAYA_CHECK(j.is_object(), "{}: the line is {}; allowed: a JSON object with \"prompt\" or \"messages\"", where,
               json_preview(j));
    RlPrompt p;
    p.where = where;
    const bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
    ZAYA_CHECK(has_prompt != has_messages,
               "{}: the record has {}; allowed: exactly one of \"prompt\" (text) and "
               "\"messages\" (a chat)",
               where,
               has_prompt ? "both \"prompt\" and \"messages\""
                          : "neither \"prompt\" "
                            "nor \"messages\"");
    if (has_prompt) {
      ZAYA_CHECK(j["prompt"].is_string(), "{}: \"prompt\" is {}; allowed: a string", where, json_preview(j["prompt"]));
      p.text = j["prompt"].get<std::string>();
      p.ids.push_back(tok.bos_id());
      for (int32_t id : tok.encode(p.text)) p.ids.push_back(id);
    } else {
      const std::vector<ChatMessage> messages = record_messages(j["messages"], where);
      p.text = render_chat(messages, true);
      p.ids = encode_chat(tok, messages, true).ids;
    }
    if (!rules.answer_field.empty()) (void)record_answer(j, rules.answer_field, where);
    const int64_t n = int64_t(p.ids.size());
    ZAYA_CHECK(n + rules.max_new_tokens <= rules.seq_len + 1,
               "{}: the prompt has {} tokens; with rl.max_new_tokens = {} a sample needs train.seq_len >= {} (it is "
               "{})",
               where, n, rules.max_new_tokens, n + rules.max_new_tokens - 1, rules.seq_len);
    p.record = std::move(j);
    out.push_back(std::move(p));
    return true;
  });
  ZAYA_CHECK(!out.empty(), "{}: holds no prompt; allowed: JSON lines with \"prompt\" or \"messages\"", path);
  return out;
}

}  // namespace zaya
