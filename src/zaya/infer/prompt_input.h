#pragma once
// Where zaya generate's prompts come from besides --prompt: a file, or
// standard input when the path is "-" (--prompt-file, llama.cpp's -f, and
// --prompts). The whole input is read before anything is generated, so every
// request can be checked first.

#include <istream>
#include <string>

namespace zaya {

// How messages name an input: the path, or "<stdin>" for "-".
std::string input_name(const std::string& path);

// The whole text of the file `path`, or of `in` read to its end when path is
// "-". Fails "FLAG: cannot read 'PATH'" when the file cannot be read.
std::string read_input_text(const std::string& path, const std::string& flag, std::istream& in);

// A prompt from a file (or "-"): its text without one final line ending
// ("\n" or "\r\n"; llama.cpp's -f drops it too, and an editor adds it).
// Fails, naming the input, line and column, on text that is not UTF-8.
std::string read_prompt_file(const std::string& path, std::istream& in);

}  // namespace zaya
