#include "zaya/infer/prompt_input.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>

#include "zaya/core/error.h"
#include "zaya/data/corpus.h"

namespace zaya {

std::string input_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::string read_input_text(const std::string& path, const std::string& flag, std::istream& in) {
  std::ostringstream text;
  if (path == "-") {
    text << in.rdbuf();
    ZAYA_CHECK(!in.bad(), "{}: cannot read standard input", flag);
    return text.str();
  }
  std::ifstream file(path, std::ios::binary);
  ZAYA_CHECK(file.good(), "{}: cannot read '{}'", flag, path);
  text << file.rdbuf();
  return text.str();
}

std::string read_prompt_file(const std::string& path, std::istream& in) {
  std::string text = read_input_text(path, "--prompt-file", in);
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string::npos) {
    const std::string_view before(text.data(), bad);
    const size_t line_start = before.rfind('\n');
    const size_t line = 1 + size_t(std::count(before.begin(), before.end(), '\n'));
    const size_t column = 1 + bad - (line_start == std::string_view::npos ? 0 : line_start + 1);
    fail("--prompt-file {}: line {}: invalid UTF-8 (byte 0x{:02x} at column {}); a prompt must be UTF-8 text",
         input_name(path), line, static_cast<unsigned char>(text[bad]), column);
  }
  if (text.size() >= 2 && text.compare(text.size() - 2, 2, "\r\n") == 0)
    text.resize(text.size() - 2);
  else if (!text.empty() && text.back() == '\n')
    text.pop_back();
  return text;
}

}  // namespace zaya
