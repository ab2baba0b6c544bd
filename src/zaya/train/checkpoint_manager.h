#pragma once
// The checkpoint manager of a training job (docs/checkpoints.md): the
// asynchronous writer with its retention policy, the run id, the step last
// saved, saves that may fail without stopping the run (train: ft.on_save_error),
// and the choice of a checkpoint to roll back to. What goes into a checkpoint
// is the job's (train_state.h); this component only stores it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zaya/ckpt/writer.h"
#include "zaya/dist/mesh.h"
#include "zaya/train/run_log.h"
#include "zaya/train/train_config.h"

namespace zaya {

class CheckpointManager {
 public:
  CheckpointManager(const TrainConfig& config, ProcessMesh& mesh, RunLog& log);

  // Collective. Never writes over another run's checkpoints: fails when the
  // run's checkpoint directory holds some and the run was not resumed.
  void check_directory(bool resumed) const;
  // Starts the writer (rank 0 picks the run id unless resume gave one).
  void open();
  bool open_now() const { return writer_ != nullptr; }
  CheckpointWriter* writer() { return writer_.get(); }
  const std::string& run_id() const { return run_id_; }
  int64_t last_saved_step() const { return last_saved_step_; }
  // The step of the newest checkpoint of this run that is on disk: published
  // by this process, or the one it resumed from (-1: none).
  int64_t safe_step() const;

  // Collective: writes `tensors` (this rank's) and `header` as the checkpoint of `step`.
  void save(int64_t step, const std::vector<SnapshotTensor>& tensors, const CheckpointMeta& header, bool async);
  // Runs a save (or a publish) so that a failed one does not stop the run at
  // once: every rank saw the failure and the previous checkpoints are intact,
  // so training goes on and the next save tries again (an incident records
  // it). It stops with an error naming the newest checkpoint when
  // ft.on_save_error is "stop", or after ft.max_failed_saves failures in a row.
  void guarded(int64_t step, const std::function<void()>& save);
  // Publishes a finished background save (cheap; guarded).
  void poll(int64_t step);
  // Waits for the pending save and publishes it (not guarded).
  void finish();
  // Before the mesh's cp groups change (a recipe phase): publishes the pending
  // save (guarded) and stops the writer; open() again afterwards lays the next
  // checkpoint out for the new groups. Returns whether the writer was open.
  bool close(int64_t step);
  // A resumed run continues the checkpoint's run id and does not save its step again.
  void adopt(const std::string& run_id, int64_t step);

  // Collective: the newest committed checkpoint (rank 0 chooses, every rank
  // gets its path; empty when there is none).
  std::string newest() const;

 private:
  const TrainConfig& config_;
  ProcessMesh& mesh_;
  RunLog& log_;
  std::unique_ptr<CheckpointWriter> writer_;
  std::string run_id_;
  int64_t last_saved_step_ = -1;
  int64_t resumed_step_ = -1;
  int64_t published_seen_ = -1;
  int failed_in_a_row_ = 0;
};

}  // namespace zaya
