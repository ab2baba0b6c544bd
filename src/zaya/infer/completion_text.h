#pragma once
// One request's completion as text, built token by token as the generator
// chooses them: each id is decoded (TextStream: whole characters only), a stop
// id is left out of the text (it ends the request, and EOS has no text), and
// the text ends before the first stop string (StopStringMatcher: what could
// still become one is held back). push() returns what may be shown now, so the
// pieces of a request, in order, are exactly its final text.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/stop_strings.h"
#include "zaya/infer/text.h"

namespace zaya {

class CompletionText {
 public:
  CompletionText(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids, std::vector<std::string> stop_strings);

  // The text that token `id` makes final ("" while it may still belong to a
  // stop string or a character is incomplete, and after a stop string).
  std::string push(int32_t id);
  // When the request has ended: the rest of its text.
  std::string finish();

  // A stop string was met: the request must end, its text is complete.
  bool stopped() const { return matcher_.stopped(); }
  // Everything push() and finish() have returned.
  const std::string& text() const { return text_; }

 private:
  std::string shown(std::string piece);

  TextStream stream_;
  StopStringMatcher matcher_;
  std::vector<int32_t> stop_ids_;
  std::string text_;
};

}  // namespace zaya
