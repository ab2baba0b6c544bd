#pragma once
// Appends one line to a log file with a single write() on an O_APPEND
// descriptor, so lines from several writers (the trainer and the supervisor
// share incidents.jsonl) never interleave.

#include <string>

namespace zaya {

// Creates the file if needed; `line` gets a trailing newline.
void append_line(const std::string& path, const std::string& line);

}  // namespace zaya
