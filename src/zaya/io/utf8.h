#pragma once
// UTF-8 validation, for text taken from files (tensor names, labels) before it
// goes into error messages or XML, where invalid bytes would break the output;
// and the cut-off character at the end of streamed text, which must not be
// shown until its last byte arrives.

#include <cstddef>
#include <string>
#include <string_view>

namespace zaya {

// Length (1-4) of the well-formed UTF-8 sequence starting at s[pos], or 0 if
// the bytes there are not one (stray continuation byte, overlong form,
// surrogate, code point above U+10FFFF, or a sequence cut off by the end).
size_t utf8_sequence_length(std::string_view s, size_t pos);

// Whether all of s is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

// Bytes at the end of `s` that begin a multi-byte sequence whose remaining
// bytes have not arrived yet (0 when s ends on a complete character). Only the
// length the lead byte announces is checked, not well-formedness: enough to
// know whether more bytes are due.
size_t incomplete_utf8_tail(std::string_view s);

// Text taken from a file, made safe for an error message printed on a
// terminal: control characters and bytes that are not UTF-8 are shown as \xNN
// escapes and anything past max_bytes is cut ("..."), so a hostile name can
// neither hide itself nor flood the screen.
std::string printable(std::string_view text, size_t max_bytes = 300);

}  // namespace zaya
