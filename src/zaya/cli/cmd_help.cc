// zaya help [VERB [SUBCOMMAND]]: the verb list, or one verb's --help.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "zaya/cli/commands.h"
#include "zaya/cli/usage_errors.h"
#include "zaya/core/error.h"

namespace zaya::cli {

void add_help_command(CLI::App& app) {
  auto words = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("help", "list the verbs, or show a verb's options: zaya help train");
  cmd->add_option("verb", *words, "a verb, and a subcommand of it (zaya help bench gemm)");
  cmd->callback([words, &app] {
    const CLI::App* target = &app;
    for (const std::string& w : *words) {
      const std::vector<const CLI::App*> named =
          target->get_subcommands([&](const CLI::App* s) { return s->get_name() == w && !s->get_group().empty(); });
      if (named.empty()) throw UsageError(unknown_verb_message(*target, w));
      target = named.front();
    }
    // The formatter itself: App::help() would describe the parsed subcommand (help) instead.
    // The usage line names the whole command ("zaya bench gemm"), as `zaya bench gemm --help` does.
    fmt::print("{}", target->get_formatter()->make_help(target, command_path(*target), CLI::AppFormatMode::Normal));
  });
}

}  // namespace zaya::cli
