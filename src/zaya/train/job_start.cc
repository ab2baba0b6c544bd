#include "zaya/train/job_start.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/dist/collective.h"
#include "zaya/dist/comm.h"
#include "zaya/dist/mesh.h"
#include "zaya/formats/model_directory.h"

namespace zaya {

void load_init_weights(const TrainConfig& config, ZayaModel& model) {
  const std::string& dir = config.init_from;
  std::error_code ec;
  ZAYA_CHECK(std::filesystem::is_regular_file(std::filesystem::path(dir) / "config.json", ec),
             "{}: model.init_from = '{}' is not a model directory (no config.json there); allowed: a directory with "
             "config.json and safetensors weights in the legacy or native layout, e.g. a run's final/",
             config.source, dir);
  const ZayaConfig theirs = read_model_directory_config(dir);
  const std::vector<std::string> diff = model_differences(config.model, theirs);
  if (!diff.empty())
    fail(
        "{}: model.init_from = '{}' holds another model than [model] (this config's value vs {}/config.json's): {}; "
        "set [model] to the directory's sizes (zaya info --model {} prints them)",
        config.source, dir, dir, fmt::join(diff, "; "), dir);
  load_model_directory_weights(model, dir);
}

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

ResumeReport resume_from_checkpoints(Comm& world, const std::string& checkpoint_dir, const std::string& what,
                                     const std::function<int64_t(const CheckpointReader&)>& load) {
  std::vector<std::string> candidates;
  if (what == "latest") {
    candidates = list_checkpoints(checkpoint_dir);
    ZAYA_CHECK(!candidates.empty(), "--resume: no checkpoint in {}", checkpoint_dir);
    std::reverse(candidates.begin(), candidates.end());
  } else {
    candidates = {what};
  }
  ResumeReport report;
  for (const std::string& dir : candidates) {
    try {
      int64_t step = 0;
      run_collectively(world, "loading checkpoint " + dir, [&] { step = load(CheckpointReader::open(dir)); });
      run_collectively(world, "setting newer checkpoints aside", [&] {
        if (world.rank() == 0)
          report.moved =
              set_aside_checkpoints_after(checkpoint_dir, step, report.damaged.empty() ? "superseded" : "damaged");
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
  throw CollectiveError(fmt::format("--resume: no checkpoint in {} could be loaded:{}", checkpoint_dir, failures),
                        false, world.rank() == 0);
}

ResumeReport resume_train_job(TrainJob& job, const std::string& what) {
  return resume_from_checkpoints(job.mesh().world(), job.config().checkpoint_dir(), what,
                                 [&](const CheckpointReader& ck) {
                                   job.resume_from(ck);
                                   return job.step();
                                 });
}

}  // namespace zaya
