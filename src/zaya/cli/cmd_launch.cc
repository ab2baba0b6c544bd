// zaya launch: the fault-tolerant supervisor (docs/fault-tolerance.md).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/launch/supervisor.h"
#include "zaya/train/train_config.h"

namespace zaya::cli {

std::vector<std::string>& launch_job_args() {
  static std::vector<std::string> args;
  return args;
}

namespace {

// The path of this executable (so the supervisor runs the same zaya).
std::string self_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("zaya") : p.string();
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<SupervisorOptions>();
  auto* cmd = app.add_subcommand(
      "launch",
      "run training under a supervisor that restarts it from the last checkpoint on failure, hang or "
      "preemption: zaya launch -n 4 -- train --config my.toml (or -- rl --config rl.toml)");
  cmd->add_option("-n,--ranks", o->ranks, "MPI ranks (1: no mpirun)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--mpirun", o->mpirun, "the MPI launcher");
  cmd->add_option("--mpirun-arg", o->mpirun_args, "an argument for the launcher (repeatable), e.g. --oversubscribe");
  cmd->add_option("--max-restarts", o->max_restarts, "failures tolerated before giving up")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--backoff", o->backoff_seconds, "seconds before the first restart (doubling)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--backoff-max", o->backoff_max_seconds, "longest restart delay")->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--setup-timeout", o->setup_timeout, "seconds a rank may spend starting up")
      ->check(CLI::Range(1.0, 1e7));
  cmd->add_option("--min-step-timeout", o->min_step_timeout, "a step is a hang only after this many seconds...")
      ->check(CLI::Range(0.1, 1e7));
  cmd->add_option("--step-timeout-factor", o->step_timeout_factor, "...and this many times the slowest step seen")
      ->check(CLI::Range(1.0, 1e6));
  cmd->add_option("--checkpoint-timeout", o->checkpoint_timeout, "seconds a checkpoint may take")
      ->check(CLI::Range(1.0, 1e7));
  cmd->add_option("--inject", o->inject, "fault injection for the first attempt only (testing)");
  // The job follows `--`: main() splits the command line there (job_args()).
  cmd->footer("The job follows --: zaya launch [options] -- train --config FILE [train options] (or rl ...)");
  cmd->callback([o] {
    SupervisorOptions opts = *o;
    opts.train_args = launch_job_args();
    ZAYA_CHECK_USAGE(!opts.train_args.empty() && (opts.train_args[0] == "train" || opts.train_args[0] == "rl"),
                     "zaya launch: the command after -- must be `train ...` or `rl ...`, got '{}'",
                     opts.train_args.empty() ? "" : opts.train_args[0]);
    // The run's directories, from the same config and --set overrides the job will use.
    std::string config;
    std::vector<std::string> overrides;
    for (size_t i = 1; i + 1 < opts.train_args.size(); ++i) {
      if (opts.train_args[i] == "--config") config = opts.train_args[i + 1];
      if (opts.train_args[i] == "--set") overrides.push_back(opts.train_args[i + 1]);
    }
    ZAYA_CHECK_USAGE(!config.empty(), "zaya launch: the {} command needs --config FILE", opts.train_args[0]);
    const TrainConfig tc = load_train_config(config, overrides);
    opts.out_dir = tc.run.out_dir;
    opts.checkpoint_dir = tc.checkpoint_dir();
    opts.zaya_binary = self_path();
    const int code = supervise(opts);
    if (code != 0) std::exit(code);
  });
}

}  // namespace zaya::cli
