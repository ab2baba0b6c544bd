#pragma once
// The requests of `zaya generate --prompts FILE.jsonl`: one JSON object per
// line, {"prompt": "...", "max_new_tokens": n, "seed": s, "temperature": t,
// "top_k": k, "top_p": p, "ignore_eos": b, "id": any}. Only "prompt" is required; the other
// keys override the defaults (the command's flags); "id" is the caller's own
// name for the request (any JSON value, as OpenAI batch's custom_id), echoed
// in its result; "ignore_eos" (a boolean, TextRequest::ignore_eos) runs the
// request to its token limit past EOS. Blank lines are skipped.
//
// Every other line is one request, and a line that cannot be one (invalid
// JSON, no string "prompt", an unknown key, a value of the wrong type or out
// of range) is still one: it carries its error, so a batch answers every line
// and the valid requests run.

#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/infer/text_request.h"

namespace zaya {

struct PromptLine {
  TextRequest request;        // the defaults with the line's prompt and keys (prompt ids left to prepare_text_request)
  nlohmann::ordered_json id;  // the line's "id" as written (key order kept); null when it has none
  std::string where;          // "FILE:LINE"
  std::string error;          // "" for a valid request, else "FILE:LINE: why"
  bool has_prompt = false;    // the line gave a string "prompt" (echoed in an error's result)
};

// One PromptLine per non-blank line of `text`, in order; `name` names the
// file in `where` and the errors. Errors name the line and the key, and list
// the allowed keys.
std::vector<PromptLine> parse_prompt_lines(std::string_view text, const std::string& name, const TextRequest& defaults);

// The same for the file `path`, or standard input (`in`) when path is "-"
// (named "<stdin>"). Fails when the input cannot be read or holds no request.
std::vector<PromptLine> read_prompts_file(const std::string& path, const TextRequest& defaults, std::istream& in);

}  // namespace zaya
