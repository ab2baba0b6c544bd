#pragma once
// The one start-up sequence of a training job, shared by `zaya train` and
// `zaya bench train`, and the resume of `zaya train --resume`. Under mpirun
// every rank runs them; each stage ends with an agreement
// (dist/collective.h), so a failure on one rank is reported by all ranks and
// none hangs:
//
//   "loading the config"          load_config() on every rank, then checked identical on all
//   "building the process mesh"   the world must be a multiple of parallel.ep x parallel.cp
//   "start-up"                    the job's construction (data, model, optimizer)

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zaya/train/train_job.h"

namespace zaya {

// model.init_from (docs/training.md): loads the weights of config.init_from (a
// model directory, legacy or native layout) into `model` (a rank's part under
// expert parallelism). Its config.json must be config.model, else an error
// naming the config, the directory and each differing key with both values.
// The optimizer state stays fresh and the run starts at step 0.
void load_init_weights(const TrainConfig& config, ZayaModel& model);

// what: how the agreement check names the config ("the training configuration").
std::unique_ptr<TrainJob> start_train_job(const std::function<TrainConfig()>& load_config,
                                          const TrainJobOptions& options,
                                          const std::string& what = "the training configuration");

struct ResumeReport {
  std::string dir;                   // the checkpoint the job continues from
  std::vector<std::string> moved;    // newer checkpoints set aside (rank 0)
  std::vector<std::string> damaged;  // checkpoints that failed to load, with why
};

// Collective. Loads `what`: a checkpoint directory, or "latest": walks back
// from the newest committed checkpoint of the run until one loads completely
// (checksums included). Newer checkpoints (damaged ones skipped, or ones the
// user chose not to resume from) are renamed, not deleted, so the run can
// write those steps.
ResumeReport resume_train_job(TrainJob& job, const std::string& what);
// The same walk for another job (`zaya rl`): `load` reads one checkpoint into
// it (collectively) and returns the step it continues from.
ResumeReport resume_from_checkpoints(Comm& world, const std::string& checkpoint_dir, const std::string& what,
                                     const std::function<int64_t(const CheckpointReader&)>& load);

}  // namespace zaya
