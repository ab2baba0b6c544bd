#pragma once
// Writing checkpoints: every rank snapshots the tensors it owns into a host
// buffer (the only part the step loop waits for), a background thread writes
// and checksums its shard file, and once every rank has finished, rank 0
// publishes the checkpoint: metadata.json is written into the hidden
// temporary directory, everything is fsynced, and the directory is renamed to
// step_XXXXXXXX. A reader therefore never sees a partial checkpoint, and a
// crash at any point leaves the previous checkpoints intact.
//
// Only one save is in flight at a time: a new save first waits for and
// publishes the previous one. The background thread never calls MPI (the
// completion check and publication are collective calls on the main thread).

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "zaya/ckpt/format.h"
#include "zaya/core/arena.h"
#include "zaya/dist/comm.h"

namespace zaya {

// One tensor this rank writes (it must be written by exactly one rank).
struct SnapshotTensor {
  std::string name;
  CkptDType dtype = CkptDType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

struct RetentionPolicy {
  int keep_last = 3;       // newest checkpoints kept (>= 1)
  int64_t keep_every = 0;  // steps that are multiples of this are kept forever (0: none)
};

struct SaveStats {
  double snapshot_seconds = 0;  // the step loop's stall
  double write_seconds = 0;     // this rank's background write (file, checksums, fsync)
  double publish_seconds = 0;
  uint64_t bytes = 0;  // this rank's shard
  int64_t step = -1;
};

class CheckpointWriter {
 public:
  // world: all ranks; root: the checkpoint directory of the run.
  CheckpointWriter(Comm& world, std::string root, std::string run_id, int dp, int ep, RetentionPolicy retention,
                   int cp = 1);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Collective. Snapshots `tensors` and writes them (in the background when
  // async, else before returning, published). The header's state,
  // config_toml, model_config and tokenizer go into metadata.json (taken from
  // rank 0); its other fields are the writer's.
  void save(int64_t step, const std::vector<SnapshotTensor>& tensors, const CheckpointMeta& header, bool async);
  // Collective; cheap. Publishes the pending save if every rank has finished writing it.
  void poll();
  // Collective. Waits for the pending save (if any) and publishes it.
  void finish();
  bool pending() const { return pending_; }
  // The step of the newest checkpoint this writer published (-1: none yet).
  int64_t published_step() const { return published_step_; }
  const SaveStats& last_stats() const { return stats_; }
  const std::string& root() const { return root_; }

 private:
  void worker();
  bool try_publish(bool wait);
  void publish();
  void apply_retention();

  Comm& world_;
  std::string root_, run_id_;
  int dp_, ep_, cp_;
  RetentionPolicy retention_;
  // This rank's pending save.
  bool pending_ = false;
  int64_t step_ = -1;
  int64_t published_step_ = -1;
  std::string tmp_dir_, file_name_;
  CheckpointMeta header_;
  std::vector<CkptTensor> records_;  // this rank's tensors (slices in its file)
  AlignedPtr<char> buffer_;
  uint64_t buffer_capacity_ = 0, buffer_used_ = 0;
  SaveStats stats_;
  // Background writer.
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool job_ = false, done_ = false, stop_ = false;
  std::string error_;
};

// The random id of a new run (rank 0's, shared with every rank).
std::string new_run_id(Comm& world);

}  // namespace zaya
