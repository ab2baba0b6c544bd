// zaya train: the training job (single process).
#include <fmt/format.h>

#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/dist/collective.h"
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
    // Under mpirun every rank runs this; each start-up stage ends with an
    // agreement, so a failure on one rank is reported by all and none hangs.
    auto world = make_world_comm();
    TrainConfig config;
    run_collectively(*world, "loading the config", [&] { config = load_train_config(o->config, o->overrides); });
    check_same_on_all_ranks(*world, train_config_to_toml(config), "the training configuration");
    std::shared_ptr<ProcessMesh> mesh;
    run_collectively(*world, "building the process mesh", [&] {
      ZAYA_CHECK(world->size() % config.parallel.ep == 0,
                 "{}: the world of {} ranks does not fit parallel.ep = {}: the world size must be a multiple of ep "
                 "(dp = world / ep)",
                 config.source, world->size(), config.parallel.ep);
    });
    mesh = std::make_shared<ProcessMesh>(std::move(world), config.parallel.ep);
    TrainerOptions options;
    options.quiet = o->quiet;
    std::unique_ptr<Trainer> trainer;
    run_collectively(mesh->world(), "start-up", [&] { trainer = std::make_unique<Trainer>(config, options, mesh); });
    TrainSummary s = trainer->run();
    if (!trainer->is_root()) return;
    fmt::print("done: {} steps, train loss {:.4f} -> {:.4f}, val loss {:.4f}{}, {:.0f} tokens/s, MFU {:.1f}%\n",
               s.steps, s.first_loss, s.final_loss, s.final_val_loss,
               s.unigram_entropy > 0 ? fmt::format(" (unigram entropy {:.4f})", s.unigram_entropy) : "",
               s.tokens_per_second, 100 * s.mfu);
  });
}

}  // namespace zaya::cli
