#include "zaya/infer/stop_strings.h"

#include <algorithm>

#include "zaya/io/utf8.h"

namespace zaya {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStringMatcher::feed(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  // Text already returned cannot hold the start of a stop string (it was held
  // back while it could), so every match lies inside held_. The first
  // occurrence of each string is its earliest-ending one.
  size_t best_end = std::string::npos, best_at = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    const size_t end = at + s.size();
    if (end < best_end || (end == best_end && at < best_at)) {
      best_end = end;
      best_at = at;
    }
  }
  if (best_at != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best_at);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is the start of some stop string, and any
  // character still missing bytes.
  size_t keep = incomplete_utf8_tail(held_);
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringMatcher::finish() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace zaya
