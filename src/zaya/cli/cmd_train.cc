// zaya train: the training job (single process).
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/fault.h"
#include "zaya/dist/collective.h"
#include "zaya/train/trainer.h"

namespace zaya::cli {
namespace {

// Loads the requested checkpoint; "latest" walks back from the newest
// committed checkpoint until one loads completely (checksums included).
void resume(Trainer& trainer, const TrainConfig& config, const std::string& what) {
  Comm& world = trainer.mesh().world();
  std::vector<std::string> candidates;
  if (what == "latest") {
    candidates = list_checkpoints(config.checkpoint_dir());
    ZAYA_CHECK(!candidates.empty(), "--resume: no checkpoint in {}", config.checkpoint_dir());
    std::reverse(candidates.begin(), candidates.end());
  } else {
    candidates = {what};
  }
  std::string failures;
  for (const std::string& dir : candidates) {
    try {
      run_collectively(world, "loading checkpoint " + dir, [&] { trainer.resume_from(CheckpointReader::open(dir)); });
      // Newer checkpoints (damaged ones we skipped, or ones the user chose not
      // to resume from) are renamed, not deleted, so this run can write those steps.
      std::vector<std::string> moved;
      run_collectively(world, "setting newer checkpoints aside", [&] {
        if (trainer.is_root())
          moved = set_aside_checkpoints_after(config.checkpoint_dir(), trainer.step(),
                                              failures.empty() ? "superseded" : "damaged");
      });
      if (trainer.is_root()) {
        if (!failures.empty()) fmt::print(stderr, "warning: skipped damaged checkpoints:{}\n", failures);
        for (const std::string& m : moved) fmt::print(stderr, "note: moved {} aside\n", m);
        fmt::print("resumed from {} (step {})\n", dir, trainer.step());
      }
      return;
    } catch (const CollectiveError& e) {
      if (what != "latest") throw;
      failures += fmt::format("\n  {}", e.what());
    }
  }
  throw CollectiveError(
      fmt::format("--resume: no checkpoint in {} could be loaded:{}", config.checkpoint_dir(), failures));
}

}  // namespace

void add_train_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool quiet = false;
    std::string resume;  // "" no, "latest", or a checkpoint directory
    int64_t stop_at = 0;
    std::string inject, heartbeat_dir;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("train", "train a model from a TOML config (configs/tiny.toml)");
  cmd->add_option("--config", o->config, "training config (TOML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides, "override a config key: section.key=value (repeatable)");
  cmd->add_flag("--quiet", o->quiet, "no progress lines");
  cmd->add_option("--inject", o->inject,
                  "inject faults for testing, e.g. kill:rank=1,step=37 (kinds: kill, hang, nan, slow, preempt, step, "
                  "startup, ckpt-write, corrupt-ckpt; docs/fault-tolerance.md)");
  cmd->add_option("--heartbeat-dir", o->heartbeat_dir, "write per-rank heartbeats there (set by zaya launch)");
  cmd->add_option("--stop-at", o->stop_at,
                  "stop after this step, with a checkpoint (the schedule still follows train.steps), e.g. to "
                  "continue later with --resume")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  cmd->add_option("--resume", o->resume,
                  "continue from a checkpoint: a step_XXXXXXXX directory, or 'latest' for the newest valid one in "
                  "the run's checkpoint directory (falling back to older ones if it is damaged)")
      ->expected(0, 1)
      ->default_str("latest");
  cmd->callback([o] {
    // Under mpirun every rank runs this; each start-up stage ends with an
    // agreement, so a failure on one rank is reported by all and none hangs.
    if (!o->inject.empty()) set_fault_plan(o->inject);
    auto world = make_world_comm();
    TrainConfig config;
    run_collectively(*world, "loading the config", [&] { config = load_train_config(o->config, o->overrides); });
    check_same_on_all_ranks(*world, train_config_to_toml(config), "the training configuration");
    std::shared_ptr<ProcessMesh> mesh;
    run_collectively(*world, "building the process mesh", [&] {
      const int ep = config.parallel.ep, cp = config.parallel.cp;
      ZAYA_CHECK(world->size() % (ep * cp) == 0,
                 "{}: the world of {} ranks does not fit parallel.ep = {} x parallel.cp = {}: the world size must be "
                 "a multiple of ep * cp (dp = world / (ep * cp))",
                 config.source, world->size(), ep, cp);
    });
    mesh = std::make_shared<ProcessMesh>(std::move(world), config.parallel.ep, config.parallel.cp);
    TrainerOptions options;
    options.quiet = o->quiet;
    options.stop_at = o->stop_at;
    options.heartbeat_dir = o->heartbeat_dir;
    std::unique_ptr<Trainer> trainer;
    run_collectively(mesh->world(), "start-up", [&] { trainer = std::make_unique<Trainer>(config, options, mesh); });
    if (!o->resume.empty()) resume(*trainer, config, o->resume);
    TrainSummary s = trainer->run();
    if (!trainer->is_root()) return;
    fmt::print("done: {} steps, train loss {:.4f} -> {:.4f}, val loss {:.4f}{}, {:.0f} tokens/s, MFU {:.1f}%\n",
               s.steps, s.first_loss, s.final_loss, s.final_val_loss,
               s.unigram_entropy > 0 ? fmt::format(" (unigram entropy {:.4f})", s.unigram_entropy) : "",
               s.tokens_per_second, 100 * s.mfu);
  });
}

}  // namespace zaya::cli
