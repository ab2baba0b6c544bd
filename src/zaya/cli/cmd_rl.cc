// zaya rl: reinforcement learning with verifiable rewards (GRPO) from a training config with an [rl] section
// (rl/rl_job.h, docs/rl.md).
#include <fmt/format.h>

#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/exit_codes.h"
#include "zaya/core/fault.h"
#include "zaya/rl/rl_job.h"

namespace zaya::cli {

void add_rl_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool quiet = false;
    int threads = 0;
    std::string resume, inject, heartbeat_dir;
    int64_t stop_at = 0;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "rl", "reinforcement learning with verifiable rewards (GRPO) from a config with an [rl] section (docs/rl.md)");
  cmd->add_option("--config", o->config, "training config (TOML) with an [rl] section")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides, "override a config key: section.key=value (repeatable), e.g. rl.group_size=8");
  auto* threads = cmd->add_option("--threads", o->threads, "OpenMP threads, as --set train.threads=N (0: all cores)")
                      ->check(CLI::Range(0, 4096))
                      ->default_str("");
  cmd->add_flag("--quiet", o->quiet, "no progress lines");
  cmd->add_option("--stop-at", o->stop_at,
                  "stop after this step with a checkpoint (the schedule still follows train.steps), to continue "
                  "later with --resume")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->default_str("");
  cmd->add_option("--resume", o->resume,
                  "continue from a checkpoint: a step_XXXXXXXX directory, or 'latest' for the newest valid one")
      ->expected(0, 1)
      ->default_str("latest");
  cmd->add_option("--inject", o->inject,
                  "inject faults for testing, e.g. kill:rank=0,step=7 (docs/fault-tolerance.md)");
  cmd->add_option("--heartbeat-dir", o->heartbeat_dir, "write heartbeats there (set by zaya launch)");
  cmd->callback([o, threads] {
    if (threads->count() > 0) o->overrides.push_back(fmt::format("train.threads={}", o->threads));
    if (!o->inject.empty()) set_fault_plan(o->inject);
    RlJobOptions options;
    options.quiet = o->quiet;
    options.resume = o->resume;
    options.stop_at = o->stop_at;
    options.heartbeat_dir = o->heartbeat_dir;
    RlSummary s;
    try {
      s = run_rl(load_train_config(o->config, o->overrides), options);
    } catch (const Preempted&) {
      fmt::print(stderr, "stopped with a checkpoint; continue with: zaya rl --config {} --resume\n", o->config);
      throw;
    }
    if (s.already_complete) {
      fmt::print("the run is already complete at step {}; nothing to do\n", s.steps);
      return;
    }
    const std::string steps =
        s.first_step > 0 ? fmt::format("steps {}-{} (resumed from step {})", s.first_step + 1, s.steps, s.first_step)
                         : fmt::format("{} steps", s.steps);
    if (s.weights_dir.empty()) {  // --stop-at
      fmt::print("stopped: {} in {:.0f} s, checkpoint at step {}; continue with: zaya rl --config {} --resume\n", steps,
                 s.seconds, s.checkpoint_step, o->config);
      return;
    }
    const std::string before = s.eval_before >= 0 ? fmt::format("{:.4f} -> ", s.eval_before) : "";
    const std::string eval = s.eval_prompts > 0 ? fmt::format(", held-out reward {}{:.4f} ({} prompts, greedy)", before,
                                                              s.eval_after, s.eval_prompts)
                                                : "";
    fmt::print("done: {} in {:.0f} s, training reward {:.4f} (step {}) -> {:.4f} (step {}){}; weights in {}\n", steps,
               s.seconds, s.first_reward, s.first_step + 1, s.last_reward, s.steps, eval, s.weights_dir);
  });
}

}  // namespace zaya::cli
