#include "zaya/ckpt/reader.h"

#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {

namespace fs = std::filesystem;

uint64_t checksum_bytes(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

CheckpointReader CheckpointReader::open(const std::string& dir) {
  CheckpointReader r;
  r.dir_ = dir;
  const std::string path = (fs::path(dir) / kCheckpointMetadata).string();
  const nlohmann::json j = read_json_file(path, "", "is '" + dir + "' a checkpoint directory?");
  r.meta_ = CheckpointMeta::from_json(j, path);
  for (const CkptFile& f : r.meta_.files) {
    const std::string fp = (fs::path(dir) / f.name).string();
    FileDescriptor fd = FileDescriptor::open_read(fp);
    const size_t size = fd.size();
    ZAYA_CHECK(size == f.bytes, "{}: {} bytes, but {} records {} (truncated or replaced)", fp, size, path, f.bytes);
    r.files_.push_back(std::move(fd));
  }
  return r;
}

void CheckpointReader::read(const std::string& name, void* dst, CkptDType dtype,
                            const std::vector<int64_t>& shape) const {
  auto it = meta_.tensors.find(name);
  ZAYA_CHECK(it != meta_.tensors.end(), "{}: checkpoint has no tensor '{}'", dir_, name);
  const CkptTensor& t = it->second;
  ZAYA_CHECK(t.dtype == dtype, "{}: tensor '{}' is {}, expected {}", dir_, name, ckpt_dtype_name(t.dtype),
             ckpt_dtype_name(dtype));
  ZAYA_CHECK(t.shape == shape, "{}: tensor '{}' has shape [{}], expected [{}] (a checkpoint of another model?)", dir_,
             name, fmt::join(t.shape, ", "), fmt::join(shape, ", "));
  const size_t width = ckpt_dtype_bytes(dtype);
  for (const CkptSlice& s : t.slices) {
    char* out = static_cast<char*>(dst) + size_t(s.start) * width;
    files_[s.file].read_exact(out, s.bytes, s.offset, "tensor '" + name + "'");
    const uint64_t h = checksum_bytes(out, s.bytes);
    ZAYA_CHECK(h == s.xxh3, "{}/{}: checksum mismatch in tensor '{}' (bytes {}..{}): stored {:016x}, computed {:016x}",
               dir_, meta_.files[s.file].name, name, s.offset, s.offset + s.bytes, s.xxh3, h);
  }
}

uint64_t CheckpointReader::verify() const {
  uint64_t total = 0;
  std::vector<char> buf;
  for (const auto& [name, t] : meta_.tensors)
    for (const CkptSlice& s : t.slices) {
      buf.resize(s.bytes);
      files_[s.file].read_exact(buf.data(), s.bytes, s.offset, "tensor '" + name + "'");
      const uint64_t h = checksum_bytes(buf.data(), s.bytes);
      ZAYA_CHECK(h == s.xxh3,
                 "{}/{}: checksum mismatch in tensor '{}' (bytes {}..{}): stored {:016x}, computed {:016x}", dir_,
                 meta_.files[s.file].name, name, s.offset, s.offset + s.bytes, s.xxh3, h);
      total += s.bytes;
    }
  return total;
}

std::vector<std::string> set_aside_checkpoints_after(const std::string& root, int64_t step, const std::string& suffix) {
  std::vector<std::string> moved;
  for (const std::string& dir : list_checkpoints(root)) {
    const int64_t s = std::stoll(fs::path(dir).filename().string().substr(5));
    if (s <= step) continue;
    std::string target = dir + "." + suffix;
    for (int i = 2; fs::exists(target); ++i) target = dir + "." + suffix + "-" + std::to_string(i);
    std::error_code ec;
    fs::rename(dir, target, ec);
    ZAYA_CHECK(!ec, "cannot move {} aside to {}: {}", dir, target, ec.message());
    moved.push_back(target);
  }
  return moved;
}

std::vector<std::string> list_checkpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  static const std::regex pattern("step_([0-9]{8})");
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(name, m, pattern))
      found.emplace_back(std::stoll(m[1].str()), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, path] : found) out.push_back(path);
  return out;
}

}  // namespace zaya
