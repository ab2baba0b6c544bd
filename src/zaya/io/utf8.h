#pragma once
// UTF-8 validation, for text taken from files (tensor names, labels) before it
// goes into error messages or XML, where invalid bytes would break the output.

#include <cstddef>
#include <string_view>

namespace zaya {

// Length (1-4) of the well-formed UTF-8 sequence starting at s[pos], or 0 if
// the bytes there are not one (stray continuation byte, overlong form,
// surrogate, code point above U+10FFFF, or a sequence cut off by the end).
size_t utf8_sequence_length(std::string_view s, size_t pos);

}  // namespace zaya
