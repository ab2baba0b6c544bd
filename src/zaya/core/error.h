#pragma once
// Errors in zaya.cpp are exceptions of one type, zaya::Error, whose message is
// written for the user: it names the file, the field and the allowed values
// (docs/developer-guide.md, "Conventions"). The CLI catches it at the top, prints the
// message and exits non-zero; nothing below the CLI prints and exits itself.

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace zaya {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace zaya

// Checks an invariant that bad input can break; the message goes to the user.
#define ZAYA_CHECK(cond, ...)               \
  do {                                      \
    if (!(cond)) ::zaya::fail(__VA_ARGS__); \
  } while (0)

// Checks an internal invariant (a bug in zaya.cpp if it fails).
#define ZAYA_ASSERT(cond)                                                                                 \
  do {                                                                                                    \
    if (!(cond)) ::zaya::fail("internal error: {}:{}: assertion '{}' failed", __FILE__, __LINE__, #cond); \
  } while (0)
