#include "zaya/cli/usage_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <regex>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/suggest.h"

namespace zaya::cli {
namespace {

// Every name of every option of `cmd`: "--temperature", "-n", "--help".
std::vector<std::string> flag_names(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& l : opt->get_lnames()) out.push_back("--" + l);
    for (const std::string& s : opt->get_snames()) out.push_back("-" + s);
  }
  return out;
}

// The subcommands of `cmd` that --help lists (hidden ones have no group).
std::vector<std::string> verb_names(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::App* sub : cmd.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
    out.push_back(sub->get_name());
  return out;
}

bool looks_like_flag(const std::string& word) {
  return word.size() > 1 && word[0] == '-' && !(std::isdigit(static_cast<unsigned char>(word[1])) || word[1] == '.');
}

// "0..1048576" from a type name "INT:INT in [0 - 1048576]" (a CLI::Range's description), or "".
std::string range_of(const std::string& type_name) {
  static const std::regex range(R"(in \[(\S+) - (\S+)\])");
  std::smatch m;
  if (!std::regex_search(type_name, m, range)) return "";
  return m[1].str() + ".." + m[2].str();
}

std::string allowed_suffix(const std::string& range) { return range.empty() ? "" : "; allowed: " + range; }

// A number printed by std::to_string, without the trailing zeros ("0.500000" -> "0.5").
std::string trimmed(std::string number) {
  if (number.find('.') == std::string::npos) return number;
  while (number.back() == '0') number.pop_back();
  if (number.back() == '.') number.pop_back();
  return number;
}

std::string see_help(const CLI::App& cmd) { return fmt::format("; see {} --help", command_path(cmd)); }

std::string unknown_flag_message(const CLI::App& cmd, const std::string& word) {
  const std::string flag = word.substr(0, word.find('='));
  const std::optional<std::string> guess = closest_name(flag, flag_names(cmd));
  return fmt::format("unknown flag '{}' for {}{}{}", flag, command_path(cmd),
                     guess ? fmt::format(" (did you mean '{}'?)", *guess) : "", see_help(cmd));
}

// An argument nobody took: a misspelt flag, a misspelt subcommand, or one word too many.
std::string unexpected_message(const CLI::App& cmd, const std::string& word) {
  if (looks_like_flag(word)) return unknown_flag_message(cmd, word);
  if (!verb_names(cmd).empty() && cmd.get_subcommands().empty()) return unknown_verb_message(cmd, word);
  return fmt::format("unexpected argument '{}' for {}{}", word, command_path(cmd), see_help(cmd));
}

// CLI11's message about one option (after "NAME: "), in the library's wording.
std::string option_message(const CLI::App& cmd, const std::string& name, const std::string& message) {
  const CLI::Option* opt = cmd.get_option_no_throw(name);
  const std::string range = opt != nullptr ? range_of(opt->get_type_name()) : "";
  std::smatch m;
  static const std::regex not_in_range(R"(Value (.*) not in range (\S+) to (\S+))");
  if (std::regex_match(message, m, not_in_range)) {
    std::string allowed = range;
    if (allowed.empty()) {
      const double hi = std::atof(m[3].str().c_str());
      allowed = hi > 1e300 ? "a number > 0" : trimmed(m[2].str()) + ".." + trimmed(m[3].str());
    }
    return fmt::format("{} {} is invalid; allowed: {}", name, m[1].str(), allowed);
  }
  static const std::regex not_a_member(R"((.*) not in \{(.*)\})");
  if (std::regex_match(message, m, not_a_member)) {
    std::string members = m[2].str();
    for (size_t i = members.find(','); i != std::string::npos; i = members.find(',', i + 2)) members.insert(i + 1, " ");
    return fmt::format("{} {} is invalid; allowed: {}", name, m[1].str(), members);
  }
  static const std::vector<std::pair<std::regex, const char*>> paths = {
      {std::regex("File does not exist: (.*)"), "no such file"},
      {std::regex("File is actually a directory: (.*)"), "is a directory, not a file"},
      {std::regex("Directory does not exist: (.*)"), "no such directory"},
      {std::regex("Directory is actually a file: (.*)"), "is a file, not a directory"},
      {std::regex("Path does not exist: (.*)"), "no such file or directory"},
  };
  for (const auto& [pattern, what] : paths)
    if (std::regex_match(message, m, pattern)) return fmt::format("{} {}: {}", name, m[1].str(), what);
  return fmt::format("{}: {}", name, message);
}

std::string describe(const CLI::App& top, const CLI::App& cmd, const CLI::Error& e) {
  const std::string what = e.what();
  std::smatch m;
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    if (what != "A subcommand is required") return what + see_help(cmd);
    const std::vector<std::string> left = cmd.remaining();
    if (!left.empty()) return unexpected_message(cmd, left.front());
    return fmt::format("{} needs a {}: {}{}", command_path(cmd), cmd.get_parent() == nullptr ? "verb" : "subcommand",
                       fmt::join(verb_names(cmd), ", "), see_help(cmd));
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    std::vector<std::string> left = cmd.remaining();
    if (left.empty()) left = top.remaining(true);
    if (!left.empty()) return unexpected_message(cmd, left.front());
    return what;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    static const std::regex at_most(R"((\S+): At Most (\d+) required but received (\d+))");
    static const std::regex at_least(R"((\S+): At least (\d+) required but received (\d+))");
    static const std::regex missing(R"((\S+): \d+ required .* missing)");
    static const std::regex expected(R"(Expected (exactly|at least) (\d+) arguments to (\S+), got (\d+))");
    if (std::regex_match(what, m, at_most)) {
      if (m[2].str() == "1") return fmt::format("{} was given {} times; it takes one value", m[1].str(), m[3].str());
      return fmt::format("{} takes at most {} values, got {}", m[1].str(), m[2].str(), m[3].str());
    }
    if (std::regex_match(what, m, at_least))
      return fmt::format("{} needs at least {} values, got {}", m[1].str(), m[2].str(), m[3].str());
    if (std::regex_match(what, m, missing)) return fmt::format("{} needs a value{}", m[1].str(), see_help(cmd));
    if (std::regex_match(what, m, expected))
      return fmt::format("{} needs {} {} value(s), got {}", m[3].str(), m[1].str(), m[2].str(), m[4].str());
    return what;
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    static const std::regex named(R"((\S+): (.*))");
    if (std::regex_match(what, m, named)) return option_message(cmd, m[1].str(), m[2].str());
    return what;
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    static const std::regex convert(R"(Could not convert: (\S+) = (.*))");
    static const std::regex not_allowed(R"(The value (.*) is not an allowed value for (\S+))");
    static const std::regex flag_value(R"((\S+): (too many inputs for a flag|Should be true/false or a number))");
    if (std::regex_match(what, m, convert)) return fmt::format("{} {} is invalid", m[1].str(), m[2].str());
    if (std::regex_match(what, m, not_allowed)) return fmt::format("{} {} is invalid", m[2].str(), m[1].str());
    if (std::regex_match(what, m, flag_value)) return fmt::format("{} takes no value", m[1].str());
    return what;
  }
  static const std::regex excludes(R"((\S+) excludes (\S+))");
  static const std::regex requires_(R"((\S+) requires (\S+))");
  if (std::regex_match(what, m, excludes))
    return fmt::format("{} and {} cannot be used together", m[1].str(), m[2].str());
  if (std::regex_match(what, m, requires_)) return fmt::format("{} needs {}", m[1].str(), m[2].str());
  return what;
}

// Refuses a value that is one of the command's flags, and a number option's value that is no number.
void check_value(const std::string& name, const std::string& type, const std::string& range,
                 const std::vector<std::string>& flags, const std::string& value) {
  const std::string head = value.substr(0, value.find('='));
  if (looks_like_flag(value) && std::find(flags.begin(), flags.end(), head) != flags.end())
    fail_usage("{} is missing its value ({} is a flag, not a value)", name, head);
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  if (type == "INT" && !CLI::detail::lexical_cast(value, i))
    fail_usage("{} {} is not an integer{}", name, value, allowed_suffix(range));
  if (type == "UINT" && !CLI::detail::lexical_cast(value, u)) {
    if (CLI::detail::lexical_cast(value, i))
      fail_usage("{} {} is invalid; allowed: {}", name, value, range.empty() ? "an integer >= 0" : range);
    fail_usage("{} {} is not an integer{}", name, value, allowed_suffix(range));
  }
  if (type == "FLOAT" && !CLI::detail::lexical_cast(value, d))
    fail_usage("{} {} is not a number{}", name, value, allowed_suffix(range));
}

}  // namespace

std::string command_path(const CLI::App& app) {
  if (app.get_parent() == nullptr) return app.get_name();
  return command_path(*app.get_parent()) + " " + app.get_name();
}

const CLI::App& innermost_command(const CLI::App& app) {
  const CLI::App* cmd = &app;
  while (!cmd->get_subcommands().empty()) cmd = cmd->get_subcommands().front();
  return *cmd;
}

std::string unknown_verb_message(const CLI::App& parent, const std::string& word) {
  const std::vector<std::string> verbs = verb_names(parent);
  const std::optional<std::string> guess = closest_name(word, verbs);
  const bool top = parent.get_parent() == nullptr;
  return fmt::format(
      "unknown {} '{}'{}{}; {}: {}", top ? "verb" : "subcommand", word, top ? "" : " of " + command_path(parent),
      guess ? fmt::format(" (did you mean '{}'?)", *guess) : "", top ? "verbs" : "subcommands", fmt::join(verbs, ", "));
}

void guard_option_values(CLI::App& app) {
  const std::vector<std::string> flags = flag_names(app);
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0 || !opt->nonpositional()) continue;  // a flag, or a positional argument
    const std::string type_name = opt->get_type_name();
    const std::string type = type_name.substr(0, type_name.find(':'));
    const std::string range = range_of(type_name), name = opt->get_name();
    opt->transform(CLI::Validator(
        [=](std::string& value) {
          check_value(name, type, range, flags, value);
          return std::string();
        },
        "", "value-guard"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) guard_option_values(*sub);
}

std::string usage_error_message(const CLI::App* app, const CLI::Error& e) {
  return "error: " + describe(*app, innermost_command(*app), e) + "\n";
}

}  // namespace zaya::cli
