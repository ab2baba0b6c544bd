#pragma once
// The one checked JSON reader: every JSON document or JSON-lines file zaya
// reads goes through here, so a malformed one always fails the same way,
// naming the file (and line): "FILE[:LINE]: invalid JSON: <what the parser says>".
// (The safetensors header has its own event parser, to reject duplicate keys;
// it reports through the same message, and nests at most 3 levels.)
//
// Nesting is capped while parsing (kMaxJsonDepth): nlohmann's parser is
// iterative, but dump(), operator== and friends recurse once per level, so a
// request body of 100k '[' (200 KB) would overflow the stack the first time
// anything printed or compared it. A document nested deeper is refused before
// the parser descends further.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace zaya {

// The deepest nesting (objects and arrays around a value) any JSON zaya reads
// may have. Our files nest a few levels (config.json's rope_scaling: 2, a
// chat request's messages[].content[] parts: 4, a bench report: ~6), so 128
// leaves a wide margin while keeping every recursion on a value a few KB of
// stack.
constexpr int kMaxJsonDepth = 128;

// Parses `text`; `where` names it in the error (a file, or file:line). Fails
// with "WHERE: invalid JSON: ..." (the parser's position and reason, without
// the library's "[json.exception...]" tag) or, for a document nested deeper
// than kMaxJsonDepth, "WHERE: JSON nests deeper than 128 levels ...".
template <typename Json = nlohmann::json>
Json parse_json(std::string_view text, const std::string& where);

// The whole JSON document in `path`. The error for a file that cannot be
// read says "cannot read [what ]'PATH'[ (hint)]", e.g. what = "hardware
// profile", hint = "a model directory holds config.json ...".
nlohmann::json read_json_file(const std::string& path, const std::string& what = "", const std::string& hint = "");

// Every non-blank line of JSON-lines `text` (from `path`), in order: fn(line,
// "PATH:N"); fn returns false to stop early.
void for_each_json_line(std::string_view text, const std::string& path,
                        const std::function<bool(nlohmann::json&& line, const std::string& where)>& fn);
// The same for a file.
void read_json_lines(const std::string& path,
                     const std::function<bool(nlohmann::json&& line, const std::string& where)>& fn);

// A JSON value as an error message shows it: compact JSON, cut after
// `max_chars` characters with the type and what was cut said, e.g.
// `[[[[[[...` + "... (an array of 200000 characters; 199900 cut)". Walks the
// value with an explicit stack (never recursion), so any value is safe to show.
// Never put a client's or a file's value into a message whole: use this.
template <typename Json = nlohmann::json>
std::string json_preview(const Json& value, size_t max_chars = 100);

// The message of a nlohmann exception without its "[json.exception.KIND.N] " tag.
std::string json_error_text(const std::exception& e);

// Checked fields of a JSON object (config files): a missing or null key
// gives `def`; a value of the wrong type fails with
// "SOURCE: \"KEY\" = VALUE is invalid; expected WHAT".
[[noreturn]] void json_field_error(const std::string& source, const std::string& key, const nlohmann::json& value,
                                   const std::string& expected);
int64_t json_int(const nlohmann::json& j, const std::string& source, const char* key, int64_t def);
double json_number(const nlohmann::json& j, const std::string& source, const char* key, double def);
bool json_bool(const nlohmann::json& j, const std::string& source, const char* key, bool def);
// A key that, when present and not null, must have exactly this value (`why` says what is allowed).
void json_require(const nlohmann::json& j, const std::string& source, const char* key, const nlohmann::json& want,
                  const std::string& why);

}  // namespace zaya
