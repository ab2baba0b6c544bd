#include "zaya/ckpt/offline.h"

#include <fmt/format.h>

#include <filesystem>

#include "zaya/ckpt/reader.h"
#include "zaya/core/arena.h"
#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {

namespace fs = std::filesystem;

int64_t OfflineTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void write_checkpoint_offline(const std::string& root, const CheckpointMeta& header, int dp, int ep,
                              const std::vector<std::vector<OfflineTensor>>& per_rank,
                              const std::function<void(const OfflineTensor&, void*)>& fill) {
  const int world = int(per_rank.size());
  ZAYA_CHECK(world == dp * ep, "internal error: {} shard lists for layout {} x {}", world, dp, ep);
  const std::string final_dir = (fs::path(root) / checkpoint_dir_name(header.step)).string();
  const std::string tmp_dir = (fs::path(root) / fmt::format(".{}.partial", checkpoint_dir_name(header.step))).string();
  ZAYA_CHECK(!fs::exists(final_dir), "{} already exists; choose another output directory", final_dir);
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  fs::create_directories(tmp_dir, ec);
  ZAYA_CHECK(!ec, "cannot create {}: {}", tmp_dir, ec.message());
  CheckpointMeta meta = header;
  meta.world = world;
  meta.dp = dp;
  meta.ep = ep;
  meta.files.clear();
  meta.tensors.clear();
  int64_t largest = 0;
  for (const auto& list : per_rank)
    for (const OfflineTensor& t : list)
      largest = std::max<int64_t>(largest, t.numel() * int64_t(ckpt_dtype_bytes(t.dtype)));
  auto buffer = aligned_alloc_array<char>(size_t(std::max<int64_t>(largest, 64)));
  static const char kZeros[64] = {};
  try {
    for (int r = 0; r < world; ++r) {
      const std::string name = fmt::format("shard-{:05}-of-{:05}.bin", r, world);
      FileDescriptor f = FileDescriptor::create((fs::path(tmp_dir) / name).string());
      uint64_t offset = 0;
      for (const OfflineTensor& t : per_rank[r]) {
        const uint64_t pad = (64 - offset % 64) % 64;  // 64-byte aligned slices, as the job writes them
        f.write_all(kZeros, pad);
        offset += pad;
        const uint64_t bytes = uint64_t(t.numel()) * ckpt_dtype_bytes(t.dtype);
        fill(t, buffer.get());
        CkptTensor rec;
        rec.name = t.name;
        rec.dtype = t.dtype;
        rec.shape = t.shape;
        rec.slices.push_back({r, offset, bytes, 0, t.numel(), checksum_bytes(buffer.get(), bytes)});
        f.write_all(buffer.get(), bytes);
        offset += bytes;
        ZAYA_CHECK(meta.tensors.count(t.name) == 0, "internal error: tensor '{}' listed twice", t.name);
        meta.tensors.emplace(t.name, std::move(rec));
      }
      f.sync();
      f.close();
      meta.files.push_back({name, offset});
    }
    const nlohmann::json j = meta.to_json();
    CheckpointMeta::from_json(j, tmp_dir);
    write_file_atomic((fs::path(tmp_dir) / kCheckpointMetadata).string(), j.dump(1) + "\n");
    sync_parent_directory((fs::path(tmp_dir) / kCheckpointMetadata).string());
    rename_file(tmp_dir, final_dir);
    sync_parent_directory(final_dir);
  } catch (...) {
    fs::remove_all(tmp_dir, ec);
    throw;
  }
}

}  // namespace zaya
