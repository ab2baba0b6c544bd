#pragma once
// "Did you mean ...?" for a misspelt name: a verb, a flag, a config key or
// section. The closest of the known names by edit distance, or the one name
// the word is a prefix of (or that is a prefix of the word), or none when
// nothing is close.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

// Edits (insert, delete, substitute, swap two neighbours) that turn a into b:
// the optimal string alignment distance, so "trian" is one edit from "train".
size_t edit_distance(std::string_view a, std::string_view b);

// The known name that `word` most likely misspells. Leading dashes are ignored
// ("-temp" and "--temperature" compare as "temp" and "temperature"); a change
// of case counts as an edit. The closest name within a third of the word's
// length in edits wins (the first of equally close ones); failing that, the
// only name that the word is a prefix of, or that is a prefix of the word
// ("temp" -> "temperature", "optimizer" -> "optim"), both of three letters or
// more. A word of one or two letters gets no suggestion, nor does a known name.
std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& names);

}  // namespace zaya
