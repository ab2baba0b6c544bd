#pragma once
// Stop strings over streamed text: decoded pieces go in as they are produced,
// text comes out as soon as it is final, and the stream ends before the first
// stop string (which is never shown). A stop string may span any number of
// pieces, so the tail that could still become one is held back until the next
// piece decides it; so is a UTF-8 character whose last bytes have not arrived.
//
// "First" is the first stop string a reader meets: the one whose last byte
// comes earliest in the text, and of those ending at the same byte the
// longest. That depends only on the text, never on where the pieces were cut
// or on the order the stop strings were given in.

#include <string>
#include <string_view>
#include <vector>

namespace zaya {

class StopStringMatcher {
 public:
  // Empty strings are ignored (they would stop every text before it starts).
  explicit StopStringMatcher(std::vector<std::string> stop_strings = {});

  // Adds the next piece; returns the text that became final with it: all of
  // it up to the stop string once one is complete, otherwise all but the
  // held-back tail. Returns "" once stopped.
  std::string feed(std::string_view piece);
  // At the end of the stream: the held-back tail (nothing once stopped).
  std::string finish();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text after everything returned so far
  bool stopped_ = false;
};

}  // namespace zaya
