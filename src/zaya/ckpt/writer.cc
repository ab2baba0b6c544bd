#include "zaya/ckpt/writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "zaya/ckpt/reader.h"
#include "zaya/core/error.h"
#include "zaya/core/fault.h"
#include "zaya/core/profiler.h"
#include "zaya/core/timer.h"
#include "zaya/dist/collective.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/file_descriptor.h"
#include "zaya/io/json_file.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSliceAlign = 64;

uint64_t align_up(uint64_t n) { return (n + kSliceAlign - 1) / kSliceAlign * kSliceAlign; }

// Variable-length text of every rank, concatenated in rank order (all ranks get all).
std::vector<std::string> all_gather_text(Comm& comm, const std::string& mine) {
  const int n = comm.size();
  std::vector<int64_t> lengths(n);
  int64_t len = int64_t(mine.size());
  comm.all_gather(&len, lengths.data(), 1, DType::kI64);
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  std::string all(size_t(total), '\0');
  comm.all_gather_v(mine.data(), all.data(), lengths.data(), DType::kU8);
  std::vector<std::string> out;
  int64_t off = 0;
  for (int64_t l : lengths) {
    out.push_back(all.substr(size_t(off), size_t(l)));
    off += l;
  }
  return out;
}

}  // namespace

std::string new_run_id(Comm& world) {
  uint64_t id = 0;
  if (world.rank() == 0) {
    std::random_device rd;
    id = (uint64_t(rd()) << 32) ^ uint64_t(rd()) ^
         uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) ^ uint64_t(::getpid());
  }
  world.broadcast(&id, 1, DType::kI64, 0);
  return fmt::format("{:016x}", id);
}

CheckpointWriter::CheckpointWriter(Comm& world, std::string root, std::string run_id, int dp, int ep,
                                   RetentionPolicy retention, int cp)
    : world_(world),
      root_(std::move(root)),
      run_id_(std::move(run_id)),
      dp_(dp),
      ep_(ep),
      cp_(cp),
      retention_(retention) {
  ZAYA_CHECK(retention_.keep_last >= 1, "checkpoint.keep_last = {} is invalid; allowed: >= 1", retention_.keep_last);
  thread_ = std::thread([this] { worker(); });
}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CheckpointWriter::worker() {
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return job_ || stop_; });
    if (stop_ && !job_) return;
    lock.unlock();
    const double t0 = now_seconds();
    std::string error;
    try {
      ZAYA_CHECK(!fault_planned("ckpt-write", world_.rank(), step_), "injected checkpoint write fault (ZAYA_FAULT)");
      // Checksums over the snapshot, then the file, fsynced.
      for (CkptTensor& t : records_)
        for (CkptSlice& s : t.slices) s.xxh3 = checksum_bytes(buffer_.get() + s.offset, s.bytes);
      FileDescriptor f = FileDescriptor::create((fs::path(tmp_dir_) / file_name_).string());
      f.write_all(buffer_.get(), buffer_used_);
      f.sync();
      f.close();
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    stats_.write_seconds = now_seconds() - t0;
    error_ = error;
    job_ = false;
    done_ = true;
    lock.unlock();
    cv_.notify_all();
  }
}

void CheckpointWriter::save(int64_t step, const std::vector<SnapshotTensor>& tensors, const CheckpointMeta& header,
                            bool async) {
  finish();  // never two saves at once
  ZAYA_PROFILE_SCOPE("ckpt.snapshot");
  const double t0 = now_seconds();
  const std::string final_dir = (fs::path(root_) / checkpoint_dir_name(step)).string();
  tmp_dir_ = (fs::path(root_) / ("." + checkpoint_dir_name(step) + ".partial")).string();
  // Rank 0 clears a partial directory left by a crashed run, then everyone writes into it.
  run_collectively(world_, "preparing the checkpoint directory", [&] {
    if (world_.rank() == 0) {
      std::error_code ec;
      ZAYA_CHECK(!fs::exists(final_dir), "{} already exists: a checkpoint of step {} is there", final_dir, step);
      fs::remove_all(tmp_dir_, ec);
      fs::create_directories(tmp_dir_, ec);
      ZAYA_CHECK(!ec, "cannot create {}: {}", tmp_dir_, ec.message());
    }
  });
  // Lay out this rank's file and copy the tensors into the host buffer.
  records_.clear();
  uint64_t need = 0;
  for (const SnapshotTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    need = align_up(need) + uint64_t(n) * ckpt_dtype_bytes(t.dtype);
  }
  if (need > buffer_capacity_) {
    buffer_ = aligned_alloc_array<char>(need);
    buffer_capacity_ = need;
  }
  uint64_t off = 0;
  for (const SnapshotTensor& t : tensors) {
    CkptTensor r;
    r.name = t.name;
    r.dtype = t.dtype;
    r.shape = t.shape;
    CkptSlice s;
    s.file = world_.rank();
    off = align_up(off);
    s.offset = off;
    s.count = r.numel();
    s.bytes = uint64_t(s.count) * ckpt_dtype_bytes(t.dtype);
    std::memcpy(buffer_.get() + off, t.data, s.bytes);
    off += s.bytes;
    r.slices.push_back(s);
    records_.push_back(std::move(r));
  }
  buffer_used_ = off;
  file_name_ = fmt::format("shard-{:05}-of-{:05}.bin", world_.rank(), world_.size());
  step_ = step;
  header_ = header;
  stats_ = SaveStats{};
  stats_.step = step;
  stats_.bytes = off;
  stats_.snapshot_seconds = now_seconds() - t0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = true;
    done_ = false;
    error_.clear();
  }
  cv_.notify_all();
  pending_ = true;
  if (!async) finish();
}

void CheckpointWriter::poll() {
  if (pending_) try_publish(false);
}

void CheckpointWriter::finish() {
  if (pending_) try_publish(true);
}

bool CheckpointWriter::try_publish(bool wait) {
  int32_t done;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wait) cv_.wait(lock, [this] { return done_; });
    done = done_ ? 1 : 0;
  }
  int32_t all_done = 0;
  world_.all_reduce(&done, &all_done, 1, DType::kI32, ReduceOp::kMin);
  if (!all_done) return false;
  pending_ = false;
  const double t0 = now_seconds();
  // A write error on any rank fails the save on every rank; the partial
  // directory is removed and earlier checkpoints stay as they were.
  std::string error = error_;
  try {
    run_collectively(world_, fmt::format("writing checkpoint step {}", step_), [&] {
      if (!error.empty()) fail("{}", error);
    });
    publish();
  } catch (...) {
    if (world_.rank() == 0) {
      std::error_code ec;
      fs::remove_all(tmp_dir_, ec);
    }
    throw;
  }
  stats_.publish_seconds = now_seconds() - t0;
  published_step_ = step_;
  return true;
}

void CheckpointWriter::publish() {
  // Every rank's records (its tensors' slices) and file size, to rank 0.
  nlohmann::json mine = nlohmann::json::object();
  mine["file"] = file_name_;
  mine["bytes"] = buffer_used_;
  nlohmann::json recs = nlohmann::json::array();
  for (const CkptTensor& t : records_) {
    CheckpointMeta one;
    one.files.push_back({file_name_, buffer_used_});
    CkptTensor copy = t;
    for (CkptSlice& s : copy.slices) s.file = 0;
    one.tensors.emplace(t.name, copy);
    recs.push_back(one.to_json()["tensors"]);
  }
  mine["tensors"] = recs;
  const std::vector<std::string> all = all_gather_text(world_, mine.dump());
  run_collectively(world_, fmt::format("publishing checkpoint step {}", step_), [&] {
    if (world_.rank() != 0) return;
    CheckpointMeta meta;
    meta.state = header_.state;
    meta.config_toml = header_.config_toml;
    meta.model_config = header_.model_config;
    meta.tokenizer = header_.tokenizer;
    meta.run_id = run_id_;
    meta.step = step_;
    meta.world = world_.size();
    meta.dp = dp_;
    meta.ep = ep_;
    meta.cp = cp_;
    for (int r = 0; r < world_.size(); ++r) {
      const nlohmann::json part = parse_json(all[r], fmt::format("rank {}'s checkpoint metadata", r));
      meta.files.push_back({part["file"].get<std::string>(), part["bytes"].get<uint64_t>()});
      for (const nlohmann::json& tensors : part["tensors"]) {
        for (auto it = tensors.begin(); it != tensors.end(); ++it) {
          CkptTensor t;
          t.name = it.key();
          t.dtype = it.value()["dtype"] == "F64" ? CkptDType::kF64 : CkptDType::kF32;
          t.shape = it.value()["shape"].get<std::vector<int64_t>>();
          for (const nlohmann::json& s : it.value()["slices"])
            t.slices.push_back({r, s["offset"].get<uint64_t>(), s["bytes"].get<uint64_t>(), s["start"].get<int64_t>(),
                                s["count"].get<int64_t>(), std::stoull(s["xxh3"].get<std::string>(), nullptr, 16)});
          ZAYA_CHECK(meta.tensors.count(t.name) == 0, "tensor '{}' was written by two ranks", t.name);
          meta.tensors.emplace(t.name, std::move(t));
        }
      }
    }
    // Validate what we are about to publish with the reader's own checks.
    const nlohmann::json j = meta.to_json();
    CheckpointMeta::from_json(j, tmp_dir_);
    write_file_atomic((fs::path(tmp_dir_) / kCheckpointMetadata).string(), j.dump(1) + "\n");
    sync_parent_directory((fs::path(tmp_dir_) / kCheckpointMetadata).string());
    const std::string final_dir = (fs::path(root_) / checkpoint_dir_name(step_)).string();
    rename_file(tmp_dir_, final_dir);
    sync_parent_directory(final_dir);
    if (fault_planned("corrupt-ckpt", 0, step_)) {  // injected: damage the shard file just published
      const std::string shard = (fs::path(final_dir) / meta.files[0].name).string();
      std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::min<uint64_t>(128, meta.files[0].bytes / 2));
      f.write("\xde\xad\xbe\xef", 4);
    }
    apply_retention();
  });
}

void CheckpointWriter::apply_retention() {
  const std::vector<std::string> all = list_checkpoints(root_);
  const size_t n = all.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + size_t(retention_.keep_last) >= n) continue;  // among the newest
    const std::string name = fs::path(all[i]).filename().string();
    const int64_t step = std::stoll(name.substr(5));
    if (retention_.keep_every > 0 && step % retention_.keep_every == 0) continue;  // permanent
    std::error_code ec;
    fs::remove_all(all[i], ec);
  }
}

}  // namespace zaya
