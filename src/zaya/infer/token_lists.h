#pragma once
// Token-id lists from a JSON file, [[id, id, ...], ...]: the input of
// `zaya score`. Reading is two steps so that a malformed file fails before the
// model, which gives the vocabulary the ids are checked against, is opened.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zaya {

// The parsed file; fails naming it when it is not JSON or not a JSON list.
nlohmann::json parse_token_lists(const std::string& path);

// The lists of a parsed file, every id checked to lie in [0, vocab); errors
// name the file, the sequence and the position. Lists may be empty.
std::vector<std::vector<int32_t>> token_lists(const nlohmann::json& lists, const std::string& path, int64_t vocab);

}  // namespace zaya
