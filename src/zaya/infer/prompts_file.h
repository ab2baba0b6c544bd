#pragma once
// The requests of `zaya generate --prompts FILE.jsonl`: one JSON object per
// line, {"prompt": "...", "max_new_tokens": n, "seed": s, "temperature": t,
// "top_k": k, "top_p": p, "id": any}. Only "prompt" is required; the other
// keys override the defaults (the command's flags), "id" is accepted for the
// caller's bookkeeping and not used. Blank lines are skipped.

#include <string>
#include <vector>

#include "zaya/infer/text_request.h"

namespace zaya {

// One request per non-blank line, in file order, each a copy of `defaults`
// with the line's prompt text and keys (the prompt ids are left to
// encode_prompt). Errors name the file, the line and the key, and list the
// allowed keys; an invalid sampling setting is reported with its line.
std::vector<TextRequest> read_prompts_file(const std::string& path, const TextRequest& defaults);

}  // namespace zaya
