#pragma once
// Option strings become enums where they enter (config files, flags, HTTP;
// docs/developer-guide.md "Conventions"): each enum has one table of its
// names, which parses the text once at the boundary, prints the value back,
// and lists the allowed values in the error. Past the boundary nothing
// compares option strings.

#include <fmt/format.h>

#include <span>
#include <string>
#include <string_view>

#include "zaya/core/error.h"

namespace zaya {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// "f32, f64": the names, for an error's "allowed:" part.
template <typename E>
std::string enum_allowed(std::span<const EnumName<E>> names) {
  std::string out;
  for (const EnumName<E>& n : names) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

// The value named `text`, or null.
template <typename E>
const E* enum_find(std::span<const EnumName<E>> names, std::string_view text) {
  for (const EnumName<E>& n : names)
    if (text == n.name) return &n.value;
  return nullptr;
}

// The value named `text`; otherwise fails with "`what` = 'text' is invalid; allowed: a, b" (`what` names the file
// and the key, e.g. "model.safetensors: zaya.rope.precision").
template <typename E>
E enum_parse(std::span<const EnumName<E>> names, std::string_view text, std::string_view what) {
  if (const E* v = enum_find(names, text)) return *v;
  fail("{} = '{}' is invalid; allowed: {}", what, text, enum_allowed(names));
}

// The name of `value` (an internal error when the table lacks it).
template <typename E>
const char* enum_name(std::span<const EnumName<E>> names, E value) {
  for (const EnumName<E>& n : names)
    if (n.value == value) return n.name;
  fail("internal error: enum value {} has no name", static_cast<int>(value));
}

}  // namespace zaya
