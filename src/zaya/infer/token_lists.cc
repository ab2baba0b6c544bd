#include "zaya/infer/token_lists.h"

#include <fstream>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {

nlohmann::json parse_token_lists(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  ZAYA_CHECK(j.is_array(), "{}: expected a JSON list of token-id lists", path);
  return j;
}

std::vector<std::vector<int32_t>> token_lists(const nlohmann::json& j, const std::string& path, int64_t vocab) {
  std::vector<std::vector<int32_t>> seqs;
  for (size_t i = 0; i < j.size(); ++i) {
    ZAYA_CHECK(j[i].is_array(), "{}: entry {} is not a list of token ids", path, i);
    std::vector<int32_t> s;
    for (size_t k = 0; k < j[i].size(); ++k) {
      const nlohmann::json& id = j[i][k];
      ZAYA_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab,
                 "{}: sequence {} position {}: {} is not a token id in 0..{}", path, i, k, json_preview(id), vocab - 1);
      s.push_back(id.get<int32_t>());
    }
    seqs.push_back(std::move(s));
  }
  return seqs;
}

}  // namespace zaya
