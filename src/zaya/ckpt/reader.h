#pragma once
// Reading checkpoints: metadata validation, tensors by name (any layout can
// read any tensor), checksum verification, and finding the checkpoints of a run.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/ckpt/format.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {

class CheckpointReader {
 public:
  // Parses and validates DIR/metadata.json and checks that every shard file
  // exists with its recorded size.
  static CheckpointReader open(const std::string& dir);

  const CheckpointMeta& meta() const { return meta_; }
  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const { return meta_.tensors.count(name) != 0; }

  // Reads tensor `name` into dst, which holds numel elements of `dtype`; the
  // stored dtype and shape must match. Every slice's checksum is verified.
  void read(const std::string& name, void* dst, CkptDType dtype, const std::vector<int64_t>& shape) const;

  // Reads every slice and checks its checksum; returns the bytes checked.
  uint64_t verify() const;

 private:
  std::string dir_;
  CheckpointMeta meta_;
  std::vector<FileDescriptor> files_;
};

// The committed checkpoint directories under `root` (step_XXXXXXXX), oldest first.
std::vector<std::string> list_checkpoints(const std::string& root);

// Renames the committed checkpoints of `root` newer than `step` to
// step_XXXXXXXX.<suffix> (kept, not deleted: data already written is never
// lost), so that a run resumed from `step` can write those steps again.
// Returns the renamed directories.
std::vector<std::string> set_aside_checkpoints_after(const std::string& root, int64_t step, const std::string& suffix);

// XXH3-64 of a byte range.
uint64_t checksum_bytes(const void* data, size_t bytes);

}  // namespace zaya
