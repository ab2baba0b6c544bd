#include "zaya/infer/prompt_batch.h"

#include <fmt/format.h>

namespace zaya {

void prepare_prompt_lines(std::vector<PromptLine>& lines, const Tokenizer& tok, const ZayaConfig& c, bool add_bos,
                          int64_t max_context) {
  for (PromptLine& line : lines) {
    if (!line.error.empty()) continue;
    const std::string why = prepare_text_request(line.request, tok, c, add_bos, max_context);
    if (!why.empty()) line.error = line.where + ": " + why;
  }
}

nlohmann::ordered_json prompt_result_json(size_t index, const PromptLine& line, const TextCompletion& done) {
  nlohmann::ordered_json j;
  j["index"] = index;
  j["id"] = line.id;
  j["prompt"] = line.has_prompt ? nlohmann::ordered_json(line.request.prompt) : nlohmann::ordered_json();
  if (!line.error.empty()) {
    j["finish_reason"] = "error";
    j["error"] = line.error;
    return j;
  }
  j["completion"] = done.text;
  j["tokens"] = done.tokens;
  j["finish_reason"] = finish_reason_name(done.finish);
  return j;
}

PromptBatchOutcome run_prompt_batch(const InferModel& model, const Tokenizer& tok, const std::vector<PromptLine>& lines,
                                    const GeneratorOptions& options,
                                    const std::function<void(const nlohmann::ordered_json&)>& emit,
                                    GenerationStats* stats) {
  PromptBatchOutcome outcome;
  InOrderCompletions in_order(lines.size(), [&](size_t i, const TextCompletion& done) {
    if (done.finish == FinishReason::kContext && lines[i].error.empty()) ++outcome.context_limited;
    emit(prompt_result_json(i, lines[i], done));
  });
  std::vector<TextRequest> valid;
  std::vector<size_t> line_of;  // the line of each valid request
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].error.empty()) {
      valid.push_back(lines[i].request);
      line_of.push_back(i);
      continue;
    }
    ++outcome.failed;
    in_order.finished(i, TextCompletion{});
  }
  TextCallbacks cb;
  cb.on_finish = [&](size_t k, const TextCompletion& done) { in_order.finished(line_of[k], done); };
  generate_text(model, tok, valid, options, cb, stats);
  return outcome;
}

std::string prompt_batch_failure(const std::vector<PromptLine>& lines) {
  constexpr size_t kNamed = 10;
  std::vector<std::string> where;
  size_t failed = 0;
  for (const PromptLine& line : lines)
    if (!line.error.empty() && failed++ < kNamed) where.push_back(line.where);
  if (failed == 0) return "";
  return fmt::format("{} of {} request{} failed ({}{}); their result lines have \"finish_reason\": \"error\"", failed,
                     lines.size(), lines.size() == 1 ? "" : "s", fmt::join(where, ", "),
                     failed > kNamed ? fmt::format(", and {} more", failed - kNamed) : "");
}

}  // namespace zaya
