#pragma once
// Errors in zaya.cpp are exceptions of one type, zaya::Error, whose message is
// written for the user: it names the file, the field and the allowed values
// (docs/developer-guide.md, "Conventions"). The CLI catches it at the top, prints the
// message and exits non-zero; nothing below the CLI prints and exits itself.
// One kind of Error is told apart: a UsageError blames the command line (a
// flag's value, flags that do not go together, a misspelt --set key), and the
// program exits 2 for it instead of 1 (docs/cli.md, "Exit codes").

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace zaya {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The command line is wrong, not the work: thrown by fail_usage / ZAYA_CHECK_USAGE
// where a library function validates a value that came from a flag.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_usage(fmt::format_string<Args...> format, Args&&... args) {
  throw UsageError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace zaya

// Checks an invariant that bad input can break; the message goes to the user.
#define ZAYA_CHECK(cond, ...)               \
  do {                                      \
    if (!(cond)) ::zaya::fail(__VA_ARGS__); \
  } while (0)

// Checks a value that came from a flag; the message names the flag and what is allowed.
#define ZAYA_CHECK_USAGE(cond, ...)               \
  do {                                            \
    if (!(cond)) ::zaya::fail_usage(__VA_ARGS__); \
  } while (0)

// Checks an internal invariant (a bug in zaya.cpp if it fails).
#define ZAYA_ASSERT(cond)                                                                                 \
  do {                                                                                                    \
    if (!(cond)) ::zaya::fail("internal error: {}:{}: assertion '{}' failed", __FILE__, __LINE__, #cond); \
  } while (0)
