#include "zaya/bench/comm_split.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "zaya/core/error.h"

namespace zaya {

SplitSpec parse_split(const std::string& text) {
  SplitSpec spec;
  spec.text = text;
  std::string word, rest;
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])))
    word += char(std::toupper(static_cast<unsigned char>(text[i++])));
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  rest = text.substr(i);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back()))) rest.pop_back();
  if (word.empty() && rest.empty()) return spec;
  if (word == "NONE" && rest.empty()) return spec;
  const char* allowed = "allowed: 'MOD n', 'DIV n', 'AND mask', 'OR mask', 'XOR mask' (n decimal or 0x hex), or NONE";
  if (word == "AND" || word == "MASK")
    spec.op = SplitSpec::Op::kAnd;
  else if (word == "OR")
    spec.op = SplitSpec::Op::kOr;
  else if (word == "XOR")
    spec.op = SplitSpec::Op::kXor;
  else if (word == "MOD")
    spec.op = SplitSpec::Op::kMod;
  else if (word == "DIV")
    spec.op = SplitSpec::Op::kDiv;
  else
    fail_usage("--split '{}': unknown operation '{}'; {}", text, word, allowed);
  char* end = nullptr;
  errno = 0;
  spec.value = std::strtoull(rest.c_str(), &end, 0);
  if (rest.empty() || end == rest.c_str() || *end != '\0' || errno != 0 || rest[0] == '-')
    fail_usage("--split '{}': '{}' is not a non-negative number; {}", text, rest, allowed);
  if ((spec.op == SplitSpec::Op::kMod || spec.op == SplitSpec::Op::kDiv) && spec.value == 0)
    fail_usage("--split '{}': {} by zero", text, word);
  return spec;
}

int split_color(const SplitSpec& spec, int world_rank) {
  const uint64_t r = uint64_t(world_rank);
  uint64_t color = 0;
  switch (spec.op) {
    case SplitSpec::Op::kNone: color = 0; break;
    case SplitSpec::Op::kAnd: color = r & spec.value; break;
    case SplitSpec::Op::kOr: color = r | spec.value; break;
    case SplitSpec::Op::kXor: color = r ^ spec.value; break;
    case SplitSpec::Op::kMod: color = r % spec.value; break;
    case SplitSpec::Op::kDiv: color = r / spec.value; break;
  }
  ZAYA_CHECK(color <= 0x7fffffffu, "--split '{}' gives rank {} the color {}, beyond MPI's int colors", spec.text,
             world_rank, color);
  return int(color);
}

}  // namespace zaya
