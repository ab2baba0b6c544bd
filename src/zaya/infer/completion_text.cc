#include "zaya/infer/completion_text.h"

#include <algorithm>

namespace zaya {

CompletionText::CompletionText(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids,
                               std::vector<std::string> stop_strings)
    : stream_(tokenizer), matcher_(std::move(stop_strings)), stop_ids_(std::move(stop_ids)) {}

std::string CompletionText::shown(std::string piece) {
  text_ += piece;
  return piece;
}

std::string CompletionText::push(int32_t id) {
  if (matcher_.stopped() || std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) return {};
  return shown(matcher_.feed(stream_.push(id)));
}

std::string CompletionText::finish() {
  if (matcher_.stopped()) return {};
  std::string rest = matcher_.feed(stream_.flush());
  rest += matcher_.finish();
  return shown(std::move(rest));
}

}  // namespace zaya
