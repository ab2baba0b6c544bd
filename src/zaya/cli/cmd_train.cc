// zaya train: the training job (single process).
#include <fmt/format.h>

#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/train/trainer.h"

namespace zaya::cli {

void add_train_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool quiet = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("train", "train a model from a TOML config (configs/tiny.toml)");
  cmd->add_option("--config", o->config, "training config (TOML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides, "override a config key: section.key=value (repeatable)");
  cmd->add_flag("--quiet", o->quiet, "no progress lines");
  cmd->callback([o] {
    TrainConfig config = load_train_config(o->config, o->overrides);
    TrainerOptions options;
    options.quiet = o->quiet;
    Trainer trainer(config, options);
    TrainSummary s = trainer.run();
    fmt::print("done: {} steps, train loss {:.4f} -> {:.4f}, val loss {:.4f}{}, {:.0f} tokens/s, MFU {:.1f}%\n",
               s.steps, s.first_loss, s.final_loss, s.final_val_loss,
               s.unigram_entropy > 0 ? fmt::format(" (unigram entropy {:.4f})", s.unigram_entropy) : "",
               s.tokens_per_second, 100 * s.mfu);
  });
}

}  // namespace zaya::cli
