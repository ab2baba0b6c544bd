#include "zaya/data/corpus.h"

#include <cerrno>
#include <cstring>

#include "zaya/core/error.h"

namespace zaya {

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Lead byte -> sequence length and the allowed range of the second byte
    // (RFC 3629 table), which excludes overlong forms, surrogates and > U+10FFFF.
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string_view::npos;
}

LineReader::LineReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) fail("{}: cannot open corpus for reading: {}", path, std::strerror(errno));
}

bool LineReader::next(std::string& line) {
  if (!std::getline(in_, line)) {
    if (in_.bad()) fail("{}: read error after line {}", path_, line_number_);
    return false;
  }
  ++line_number_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  size_t bad = find_invalid_utf8(line);
  if (bad != std::string_view::npos)
    fail("{}: line {}: invalid UTF-8 (byte 0x{:02x} at column {}); the corpus must be UTF-8 text", path_, line_number_,
         static_cast<unsigned char>(line[bad]), bad + 1);
  return true;
}

bool is_blank_line(std::string_view line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
  return true;
}

bool CorpusReader::next(CorpusDocument& doc) {
  doc.text.clear();
  // Skip the blank lines before the document.
  for (;;) {
    if (!lines_.next(line_)) return false;
    if (!is_blank_line(line_)) break;
  }
  doc.index = next_index_++;
  doc.first_line = lines_.line_number();
  doc.text = line_;
  while (lines_.next(line_) && !is_blank_line(line_)) {
    doc.text += '\n';
    doc.text += line_;
  }
  return true;
}

}  // namespace zaya
