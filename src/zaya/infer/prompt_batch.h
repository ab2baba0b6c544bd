#pragma once
// zaya generate --prompts: the lines of a JSONL file (prompts_file.h) run as
// one batch with continuous batching (generate_job.h). Every line gets one
// result line, in input order, each as soon as it and every line before it
// are done: a completion, or, for a line that cannot run (a bad line, a
// prompt too long for the context), its error, while the other requests run.
// Every request is checked before anything is generated.

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/generate_job.h"
#include "zaya/infer/prompts_file.h"

namespace zaya {

// Encodes each valid line's prompt and checks it against the model under the
// context cap `max_context` (0: none): a line that cannot run gets its
// error, "FILE:LINE: why" (prepare_text_request).
void prepare_prompt_lines(std::vector<PromptLine>& lines, const Tokenizer& tokenizer, const ZayaConfig& config,
                          bool add_bos, int64_t max_context = 0);

// The result line of request `index`:
//   {"index", "id", "prompt", "completion", "tokens", "finish_reason"}
// or, for a line with an error (`completion` is not used),
//   {"index", "id", "prompt", "finish_reason": "error", "error": "FILE:LINE: why"}
// "id" is the line's (null when it has none); "prompt" is null when the line
// has no string prompt.
nlohmann::ordered_json prompt_result_json(size_t index, const PromptLine& line, const TextCompletion& completion);

struct PromptBatchOutcome {
  size_t failed = 0;           // lines with an error
  size_t context_limited = 0;  // completions that ended at the context limit (GenerationStats::context)
};

// Runs the valid lines (after prepare_prompt_lines) and hands every line's
// result (prompt_result_json) to `emit` in line order: the lines with an
// error before any token is generated if they come first, the others as they
// and all before them finish.
PromptBatchOutcome run_prompt_batch(const InferModel& model, const Tokenizer& tokenizer,
                                    const std::vector<PromptLine>& lines, const GeneratorOptions& options,
                                    const std::function<void(const nlohmann::ordered_json&)>& emit,
                                    GenerationStats* stats = nullptr);

// "" when every line can run; else what to report once every result is out,
// e.g. "2 of 5 requests failed (p.jsonl:2, p.jsonl:4); their result lines
// have "finish_reason": "error"" (the first 10 lines named).
std::string prompt_batch_failure(const std::vector<PromptLine>& lines);

}  // namespace zaya
