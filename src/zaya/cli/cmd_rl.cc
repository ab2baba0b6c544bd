// zaya rl: reinforcement learning with verifiable rewards (GRPO) from a training config with an [rl] section
// (rl/rl_job.h, docs/rl.md).
#include <fmt/format.h>

#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/rl/rl_job.h"

namespace zaya::cli {

void add_rl_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool quiet = false;
    int threads = 0;
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
  cmd->callback([o, threads] {
    if (threads->count() > 0) o->overrides.push_back(fmt::format("train.threads={}", o->threads));
    RlJobOptions options;
    options.quiet = o->quiet;
    const RlSummary s = run_rl(load_train_config(o->config, o->overrides), options);
    const std::string eval = s.eval_prompts > 0 ? fmt::format(", held-out reward {:.4f} -> {:.4f} ({} prompts, greedy)",
                                                              s.eval_before, s.eval_after, s.eval_prompts)
                                                : "";
    fmt::print("done: {} steps in {:.0f} s, training reward {:.4f} (step 1) -> {:.4f} (step {}){}; weights in {}\n",
               s.steps, s.seconds, s.first_reward, s.last_reward, s.steps, eval, s.weights_dir);
  });
}

}  // namespace zaya::cli
