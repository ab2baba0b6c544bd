// zaya train: the training job (train/train_job.h), one process or every rank of an mpirun.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/core/fault.h"
#include "zaya/train/job_start.h"

namespace zaya::cli {
namespace {

std::string damaged_list(const ResumeReport& r) {
  std::string out;
  for (const std::string& d : r.damaged) out += fmt::format("\n  {}", d);
  return out;
}

}  // namespace

void add_train_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool quiet = false;
    std::string resume;  // "" no, "latest", or a checkpoint directory
    int64_t stop_at = 0;
    int threads = 0;
    std::string inject, heartbeat_dir;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("train", "train a model from a TOML config (configs/tiny.toml)");
  cmd->add_option("--config", o->config, "training config (TOML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides, "override a config key: section.key=value (repeatable)");
  auto* threads = cmd->add_option("--threads", o->threads,
                                  "OpenMP threads per rank, as --set train.threads=N (0: all cores; default: the "
                                  "config's train.threads)")
                      ->check(CLI::Range(0, 4096))
                      ->default_str("");
  cmd->add_flag("--quiet", o->quiet, "no progress lines");
  cmd->add_option("--inject", o->inject,
                  "inject faults for testing, e.g. kill:rank=1,step=37 (kinds: kill, hang, nan, slow, preempt, step, "
                  "startup, ckpt-write, corrupt-ckpt; docs/fault-tolerance.md)");
  cmd->add_option("--heartbeat-dir", o->heartbeat_dir, "write per-rank heartbeats there (set by zaya launch)");
  cmd->add_option("--stop-at", o->stop_at,
                  "stop after this step, with a checkpoint (the schedule still follows train.steps), e.g. to "
                  "continue later with --resume (default: run to train.steps)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->default_str("");
  cmd->add_option("--resume", o->resume,
                  "continue from a checkpoint: a step_XXXXXXXX directory, or 'latest' for the newest valid one in "
                  "the run's checkpoint directory (falling back to older ones if it is damaged)")
      ->expected(0, 1)
      ->default_str("latest");
  cmd->callback([o, threads] {
    if (threads->count() > 0) o->overrides.push_back(fmt::format("train.threads={}", o->threads));  // wins over --set
    if (!o->inject.empty()) set_fault_plan(o->inject);
    TrainJobOptions options;
    options.quiet = o->quiet;
    options.stop_at = o->stop_at;
    options.heartbeat_dir = o->heartbeat_dir;
    options.init_weights = o->resume.empty();  // a resume loads the checkpoint's weights instead
    std::unique_ptr<TrainJob> job = start_train_job(
        [&] {
          TrainConfig c = load_train_config(o->config, o->overrides);
          ZAYA_CHECK(!c.rl.enabled, "{}: has an [rl] section, which `zaya rl --config {}` runs (docs/rl.md)", c.source,
                     c.source);
          return c;
        },
        options);
    if (o->resume.empty() && !job->config().init_from.empty() && job->is_root())
      fmt::print("starting from the weights of {} (model.init_from; fresh optimizer state, step 0)\n",
                 job->config().init_from);
    if (!o->resume.empty()) {
      const ResumeReport r = resume_train_job(*job, o->resume);
      if (job->is_root()) {
        if (!r.damaged.empty()) fmt::print(stderr, "warning: skipped damaged checkpoints:{}\n", damaged_list(r));
        for (const std::string& m : r.moved) fmt::print(stderr, "note: moved {} aside\n", m);
        fmt::print("resumed from {} (step {})\n", r.dir, job->step());
      }
    }
    TrainSummary s;
    try {
      s = job->run();
    } catch (const Preempted&) {
      if (job->is_root())
        fmt::print(stderr, "stopped at step {} with a checkpoint; continue with: zaya train --config {} --resume\n",
                   job->step(), o->config);
      throw;
    }
    if (!job->is_root()) return;
    if (s.already_complete) {
      fmt::print("the run is already complete at step {} (train.steps {}); nothing to do\n", s.steps,
                 job->config().run.steps);
      return;
    }
    const std::string steps =
        s.first_step > 0 ? fmt::format("steps {}-{} (resumed from step {})", s.first_step + 1, s.steps, s.first_step)
                         : fmt::format("{} steps", s.steps);
    fmt::print("done: {}, train loss {}, val loss {:.4f}{}, {:.0f} tokens/s, MFU {:.1f}%\n", steps,
               s.train_loss.describe(), s.final_val_loss,
               s.unigram_entropy > 0 ? fmt::format(" (unigram entropy {:.4f})", s.unigram_entropy) : "",
               s.tokens_per_second, 100 * s.mfu);
    if (s.checkpoint_step >= 0 && s.checkpoint_step < s.steps)
      fmt::print(stderr, "warning: the newest checkpoint is step {}: steps {}..{} are not saved\n", s.checkpoint_step,
                 s.checkpoint_step + 1, s.steps);
    if (s.dropped_records > 0)
      fmt::print(stderr, "warning: {} metric record(s) could not be written to {}/metrics.jsonl\n", s.dropped_records,
                 job->config().run.out_dir);
  });
}

}  // namespace zaya::cli
