#pragma once
// What the program says when the command line is wrong (docs/cli.md, "Exit
// codes"): one `error: ...` line, the misspelt verb or flag named with the
// closest known one, CLI11's own messages in the wording of the library's flag
// checks ("--top-p 2 is invalid; allowed: ..."). Every such error exits 2.

#include <CLI/CLI.hpp>
#include <string>

namespace zaya::cli {

// "zaya bench gemm": the command as typed, from the program down to `app`.
std::string command_path(const CLI::App& app);

// The innermost verb or subcommand that parsing reached (`app` itself when none).
const CLI::App& innermost_command(const CLI::App& app);

// "unknown verb 'trian' (did you mean 'train'?); verbs: info, data, train, ..."
// for a word that names no subcommand of `parent`.
std::string unknown_verb_message(const CLI::App& parent, const std::string& word);

// Checks every value of every option of `app` and its subcommands before
// CLI11's own checks: a value that is one of the command's flags means the
// option's value is missing (`--max-new-tokens --threads 4`), and a number
// option's value must be a number before any range applies. Both throw a
// zaya::UsageError. Call once, after every verb is added.
void guard_option_values(CLI::App& app);

// The failure message for a CLI11 parse error (CLI::App::failure_message):
// "error: ...\n", naming the verb or flag and what is allowed.
std::string usage_error_message(const CLI::App* app, const CLI::Error& e);

}  // namespace zaya::cli
