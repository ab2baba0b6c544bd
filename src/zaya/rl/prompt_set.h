#pragma once
// The prompts of an RL run (rl.prompts, rl.eval_prompts; docs/rl.md): one JSON
// object per line with either "prompt" (text, encoded as it is after BOS) or
// "messages" (a chat, rendered by the chat template with the generation
// prompt: data/chat_template.h), and any other fields, which the reward reads
// (rl.answer_field for the built-in verifiers). Errors name FILE:LINE and the
// field.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"

namespace zaya {

struct RlPrompt {
  std::vector<int32_t> ids;  // BOS first
  std::string text;          // the prompt as text (a chat as the template renders it)
  nlohmann::json record;     // the whole record
  std::string where;         // "FILE:LINE"
};

struct RlPromptRules {
  std::string answer_field;    // each record must have it ("" : no field required, a reward program's run)
  int64_t max_new_tokens = 0;  // with the prompt's tokens at most seq_len + 1 (one training row)
  int64_t seq_len = 0;
};

// Fails naming the file, line and field of the first bad record, or when the file holds none.
std::vector<RlPrompt> read_rl_prompts(const std::string& path, const Tokenizer& tokenizer, const RlPromptRules& rules);

}  // namespace zaya
