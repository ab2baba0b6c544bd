#pragma once
// Helpers for the ops tests (document masking's positions).

#include <algorithm>
#include <cstdint>
#include <vector>

namespace zaya::testing {

// Document masking: [B * S] positions of each row inside its document, for B
// sequences of S rows whose documents begin at starts[b] (ascending from 0).
inline std::vector<int32_t> doc_positions(int64_t S, const std::vector<std::vector<int32_t>>& starts) {
  std::vector<int32_t> doc;
  for (const auto& st : starts)
    for (int64_t i = 0, cur = 0; i < S; ++i) {
      if (std::find(st.begin(), st.end(), int32_t(i)) != st.end()) cur = i;
      doc.push_back(int32_t(i - cur));
    }
  return doc;
}

}  // namespace zaya::testing
