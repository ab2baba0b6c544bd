#include "zaya/train/job_start.h"

#include <fmt/format.h>

#include <algorithm>

#include "zaya/core/error.h"
#include "zaya/dist/collective.h"
#include "zaya/dist/comm.h"
#include "zaya/dist/mesh.h"

namespace zaya {

std::unique_ptr<TrainJob> start_train_job(const std::function<TrainConfig()>& load_config,
                                          const TrainJobOptions& options, const std::string& what) {
  auto world = make_world_comm();
  TrainConfig config;
  run_collectively(*world, "loading the config", [&] { config = load_config(); });
  check_same_on_all_ranks(*world, train_config_to_toml(config), what);
  run_collectively(*world, "building the process mesh",
                   [&] { check_world_fits(world->size(), config.parallel.ep, config.parallel.cp, config.source); });
  auto mesh = std::make_shared<ProcessMesh>(std::move(world), config.parallel.ep, config.parallel.cp);
  std::unique_ptr<TrainJob> job;
  run_collectively(mesh->world(), "start-up", [&] { job = std::make_unique<TrainJob>(config, options, mesh); });
  return job;
}

ResumeReport resume_train_job(TrainJob& job, const std::string& what) {
  Comm& world = job.mesh().world();
  const TrainConfig& config = job.config();
  std::vector<std::string> candidates;
  if (what == "latest") {
    candidates = list_checkpoints(config.checkpoint_dir());
    ZAYA_CHECK(!candidates.empty(), "--resume: no checkpoint in {}", config.checkpoint_dir());
    std::reverse(candidates.begin(), candidates.end());
  } else {
    candidates = {what};
  }
  ResumeReport report;
  for (const std::string& dir : candidates) {
    try {
      run_collectively(world, "loading checkpoint " + dir, [&] { job.resume_from(CheckpointReader::open(dir)); });
      run_collectively(world, "setting newer checkpoints aside", [&] {
        if (job.is_root())
          report.moved = set_aside_checkpoints_after(config.checkpoint_dir(), job.step(),
                                                     report.damaged.empty() ? "superseded" : "damaged");
      });
      report.dir = dir;
      return report;
    } catch (const CollectiveError& e) {
      if (what != "latest") throw;
      report.damaged.push_back(e.what());
    }
  }
  std::string failures;
  for (const std::string& d : report.damaged) failures += fmt::format("\n  {}", d);
  throw CollectiveError(
      fmt::format("--resume: no checkpoint in {} could be loaded:{}", config.checkpoint_dir(), failures), false,
      world.rank() == 0);
}

}  // namespace zaya
