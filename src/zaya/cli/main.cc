// zaya: one program for the life of a ZAYA1-family MoE model (README.md, docs/cli.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/dist/collective.h"
#include "zaya/dist/comm.h"

int main(int argc, char** argv) {
  CLI::App app{"zaya: train, evaluate and run ZAYA1-family mixture-of-experts models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "zaya 0.1.0");
  zaya::cli::add_info_command(app);
  zaya::cli::add_data_command(app);
  zaya::cli::add_train_command(app);
  zaya::cli::add_generate_command(app);
  zaya::cli::add_score_command(app);
  zaya::cli::add_bench_command(app);
  zaya::cli::add_eval_command(app);
  zaya::cli::add_report_command(app);
  zaya::cli::add_ckpt_command(app);
  zaya::cli::add_launch_command(app);
  zaya::cli::add_size_command(app);
  zaya::cli::add_plan_command(app);
  zaya::cli::add_profile_command(app);
  // `zaya launch [options] -- train ...`: the job's arguments are not ours to parse.
  if (argc > 1 && std::string(argv[1]) == "launch") {
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--") {
        for (int j = i + 1; j < argc; ++j) zaya::cli::launch_job_args().push_back(argv[j]);
        argc = i;
        break;
      }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);             // prints help, version or the usage error
    return code == 0 ? 0 : zaya::kExitUsage;  // usage errors exit with 2, failures with 1
  } catch (const zaya::Preempted& e) {
    // Every rank stopped at the same step boundary after the checkpoint.
    std::fflush(stdout);
    fmt::print(stderr, "{}\n", e.what());
    return zaya::kExitPreempted;
  } catch (const zaya::CollectiveError& e) {
    // Every rank failed together (start-up agreement): a normal exit.
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return zaya::kExitFailure;
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
