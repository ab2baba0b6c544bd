// zaya: one program for the life of a ZAYA1-family MoE model (README.md, docs/cli.md).
// Exit codes (docs/cli.md, "Exit codes"): 0 success, 1 failure, 2 usage error
// (the command line alone is wrong), 75 preempted (core/exit_codes.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <memory>
#include <sstream>
#include <string>

#include "zaya/cli/commands.h"
#include "zaya/cli/help_format.h"
#include "zaya/cli/usage_errors.h"
#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/dist/collective.h"
#include "zaya/dist/comm.h"

int main(int argc, char** argv) {
  CLI::App app{"zaya: train, evaluate and run ZAYA1-family mixture-of-experts models", "zaya"};
  // Every option's --help shows its default ("[default: 0.8]"); set before any
  // verb is added, as subcommands inherit both.
  app.formatter(std::make_shared<zaya::cli::HelpFormatter>());
  app.option_defaults()->always_capture_default();
  app.require_subcommand(0, 1);  // a bare `zaya` lists the verbs
  app.set_version_flag("--version", "zaya 0.1.0");
  zaya::cli::add_info_command(app);
  zaya::cli::add_data_command(app);
  zaya::cli::add_train_command(app);
  zaya::cli::add_rl_command(app);
  zaya::cli::add_generate_command(app);
  zaya::cli::add_score_command(app);
  zaya::cli::add_serve_command(app);
  zaya::cli::add_bench_command(app);
  zaya::cli::add_eval_command(app);
  zaya::cli::add_report_command(app);
  zaya::cli::add_ckpt_command(app);
  zaya::cli::add_launch_command(app);
  zaya::cli::add_size_command(app);
  zaya::cli::add_plan_command(app);
  zaya::cli::add_profile_command(app);
  zaya::cli::add_help_command(app);
  zaya::cli::guard_option_values(app);
  app.failure_message(zaya::cli::usage_error_message);
  // `zaya launch [options] -- train ...`: the job's arguments are not ours to parse.
  if (argc > 1 && std::string(argv[1]) == "launch") {
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--") {
        for (int j = i + 1; j < argc; ++j) zaya::cli::launch_job_args().push_back(argv[j]);
        argc = i;
        break;
      }
  }
  // Under mpirun every rank parses the same command line: rank 0 alone says what is wrong with it.
  const bool speaks = zaya::launcher_rank() == 0;
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) fmt::print("{}", app.help());
  } catch (const CLI::ParseError& e) {
    std::ostringstream quiet;
    const int code = speaks ? app.exit(e) : app.exit(e, quiet, quiet);  // help, version or the usage error
    return code == 0 ? 0 : zaya::kExitUsage;
  } catch (const zaya::Preempted& e) {
    // Every rank stopped at the same step boundary after the checkpoint.
    std::fflush(stdout);
    fmt::print(stderr, "{}\n", e.what());
    return zaya::kExitPreempted;
  } catch (const zaya::CollectiveError& e) {
    // Every rank failed together (an agreed error): one of them reports it, all exit alike.
    std::fflush(stdout);
    if (e.print_here()) fmt::print(stderr, "error: {}\n", e.what());
    return e.usage() ? zaya::kExitUsage : zaya::kExitFailure;
  } catch (const zaya::UsageError& e) {
    // A flag's value or a --set key: the same command line, so the same error, on every rank.
    std::fflush(stdout);
    if (speaks) fmt::print(stderr, "error: {}\n", e.what());
    if (zaya::launched_by_mpi()) zaya::abort_world(zaya::kExitUsage);
    return zaya::kExitUsage;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    // Under mpirun the other ranks may be waiting in a collective for this
    // one: stop them all now rather than let them hang.
    if (zaya::launched_by_mpi()) zaya::abort_world(zaya::kExitFailure);
    return zaya::kExitFailure;
  }
  return 0;
}
