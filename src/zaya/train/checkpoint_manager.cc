#include "zaya/train/checkpoint_manager.h"

#include <fmt/format.h>

#include <algorithm>

#include "zaya/ckpt/reader.h"
#include "zaya/core/error.h"
#include "zaya/dist/collective.h"

namespace zaya {

CheckpointManager::CheckpointManager(const TrainConfig& config, ProcessMesh& mesh, RunLog& log)
    : config_(config), mesh_(mesh), log_(log) {}

void CheckpointManager::check_directory(bool resumed) const {
  run_collectively(mesh_.world(), "checking the checkpoint directory", [&] {
    if (mesh_.rank() == 0 && !resumed && !list_checkpoints(config_.checkpoint_dir()).empty())
      fail(
          "{} already holds checkpoints (latest {}); pass --resume to continue that run, or choose another "
          "train.out_dir / checkpoint.dir",
          config_.checkpoint_dir(), list_checkpoints(config_.checkpoint_dir()).back());
  });
}

void CheckpointManager::open() {
  if (writer_) return;
  if (run_id_.empty()) run_id_ = new_run_id(mesh_.world());
  RetentionPolicy keep;
  keep.keep_last = config_.checkpoint.keep_last;
  keep.keep_every = config_.checkpoint.keep_every;
  writer_ = std::make_unique<CheckpointWriter>(mesh_.world(), config_.checkpoint_dir(), run_id_, mesh_.dp_size(),
                                               mesh_.ep_size(), keep, mesh_.cp_size());
}

void CheckpointManager::save(int64_t step, const std::vector<SnapshotTensor>& tensors, const CheckpointMeta& header,
                             bool async) {
  open();
  writer_->save(step, tensors, header, async);
  last_saved_step_ = step;
}

int64_t CheckpointManager::safe_step() const {
  return std::max(resumed_step_, writer_ ? std::max(published_seen_, writer_->published_step()) : published_seen_);
}

void CheckpointManager::guarded(int64_t step, const std::function<void()>& save) {
  try {
    save();
  } catch (const CollectiveError& e) {
    ++failed_in_a_row_;
    const bool stop = config_.ft.on_save_error == OnSaveError::kStop;
    const int limit = stop ? 1 : config_.ft.max_failed_saves;
    if (limit > 0 && failed_in_a_row_ >= limit)  // the job says which steps are lost (train_job.cc)
      throw CollectiveError(
          fmt::format("{}; {} checkpoint save(s) in a row failed, stopping at step {} (ft.{}); "
                      "make room and continue with --resume",
                      e.what(), failed_in_a_row_, step, stop ? "on_save_error = \"stop\"" : "max_failed_saves"),
          e.usage(), e.print_here());
    log_.incident("save-failed", std::string(e.what()) + "; training continues, the next save will try again", step);
    return;
  }
  if (writer_ && writer_->published_step() > published_seen_) {
    published_seen_ = writer_->published_step();
    failed_in_a_row_ = 0;
  }
}

void CheckpointManager::poll(int64_t step) {
  guarded(step, [&] {
    if (writer_) writer_->poll();
  });
}

void CheckpointManager::finish() {
  if (writer_) writer_->finish();
}

bool CheckpointManager::close(int64_t step) {
  if (!writer_) return false;
  guarded(step, [&] { writer_->finish(); });
  published_seen_ = std::max(published_seen_, writer_->published_step());
  writer_.reset();
  return true;
}

void CheckpointManager::adopt(const std::string& run_id, int64_t step) {
  run_id_ = run_id;
  last_saved_step_ = step;
  resumed_step_ = step;
}

std::string CheckpointManager::newest() const {
  std::string path;
  if (mesh_.rank() == 0) {
    const auto all = list_checkpoints(config_.checkpoint_dir());
    if (!all.empty()) path = all.back();
  }
  int64_t length = int64_t(path.size());
  mesh_.world().broadcast(&length, 1, DType::kI64, 0);
  path.resize(size_t(length));
  mesh_.world().broadcast(path.data(), size_t(length), DType::kU8, 0);
  return path;
}

}  // namespace zaya
