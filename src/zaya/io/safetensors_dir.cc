#include "zaya/io/safetensors_dir.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/mapped_file.h"
#include "zaya/io/utf8.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Real indexes are well under 10 MB (one line per tensor); anything far larger is not an index.
constexpr size_t kMaxIndexBytes = 100'000'000;

// The index names shard files inside the directory; a name with a path in it
// ("../x", "/etc/y") would make a hostile index open files elsewhere.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// weight_map in file order as (tensor, shard file) pairs.
std::vector<std::pair<std::string, std::string>> read_weight_map(const std::string& index_path) {
  MappedFile file(index_path);
  auto bytes = file.bytes();
  ZAYA_CHECK(bytes.size() <= kMaxIndexBytes, "{}: {} bytes is too large for a safetensors index", index_path,
             bytes.size());
  const Json root =
      parse_json<Json>(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), index_path);
  ZAYA_CHECK(root.is_object(), "{}: top level is a JSON {}, expected an object", index_path, root.type_name());
  auto map = root.find("weight_map");
  ZAYA_CHECK(map != root.end(), "{}: missing field 'weight_map'", index_path);
  ZAYA_CHECK(map->is_object(), "{}: 'weight_map' is a JSON {}, expected an object", index_path, map->type_name());

  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(map->size());
  for (auto it = map->begin(); it != map->end(); ++it) {
    ZAYA_CHECK(it.value().is_string(), "{}: weight_map entry for tensor '{}' is a JSON {}, expected a file name",
               index_path, printable(it.key()), it.value().type_name());
    const auto& shard = it.value().get_ref<const std::string&>();
    ZAYA_CHECK(is_plain_file_name(shard),
               "{}: weight_map entry for tensor '{}' is '{}', not a file name in the directory", index_path,
               printable(it.key()), printable(shard));
    entries.emplace_back(it.key(), shard);
  }
  return entries;
}

std::string shard_file_name(size_t index, size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

}  // namespace

SafetensorsDir SafetensorsDir::open(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    SafetensorsDir d;
    d.path_ = path;
    d.shards_.push_back(SafetensorsFile::open(path));
    d.names_ = d.shards_[0].names();
    for (const auto& name : d.names_) d.shard_of_.emplace(name, 0);
    return d;
  }
  ZAYA_CHECK(fs::is_directory(path, ec), "{}: no such file or directory", path);
  if (fs::exists(fs::path(path) / kSafetensorsIndexFile, ec)) return open_index(path);
  fs::path single = fs::path(path) / kSafetensorsSingleFile;
  ZAYA_CHECK(fs::exists(single, ec), "{}: neither {} nor {} exists", path, kSafetensorsIndexFile,
             kSafetensorsSingleFile);
  return open(single.string());
}

SafetensorsDir SafetensorsDir::open_index(const std::string& dir) {
  const std::string index_path = (fs::path(dir) / kSafetensorsIndexFile).string();
  auto weight_map = read_weight_map(index_path);

  SafetensorsDir d;
  d.path_ = dir;
  std::map<std::string, size_t> shard_index;  // shard file name -> index into shards_
  for (const auto& [tensor, shard] : weight_map) {
    auto [it, added] = shard_index.emplace(shard, d.shards_.size());
    if (added) {
      fs::path shard_path = fs::path(dir) / shard;
      std::error_code ec;
      ZAYA_CHECK(fs::exists(shard_path, ec), "{}: shard '{}' (listed for tensor '{}') does not exist", index_path,
                 shard, printable(tensor));
      d.shards_.push_back(SafetensorsFile::open(shard_path.string()));
    }
    const SafetensorsFile& file = d.shards_[it->second];
    ZAYA_CHECK(file.has(tensor), "{}: tensor '{}' is listed in the index but absent from shard {}", index_path,
               printable(tensor), file.path());
    d.names_.push_back(tensor);
    d.shard_of_.emplace(tensor, it->second);
  }
  // Each tensor found in a shard must be the one the index points to: a second
  // copy elsewhere, or a tensor the index does not know, means the index and
  // the shards disagree and it is unclear which copy the writer meant.
  for (size_t s = 0; s < d.shards_.size(); ++s) {
    for (const auto& t : d.shards_[s].tensors()) {
      auto it = d.shard_of_.find(t.name);
      ZAYA_CHECK(it != d.shard_of_.end(), "{}: shard {} contains tensor '{}', which the index does not list",
                 index_path, d.shards_[s].path(), printable(t.name));
      ZAYA_CHECK(it->second == s, "{}: tensor '{}' is present in two shards, {} and {}", index_path, printable(t.name),
                 d.shards_[it->second].path(), d.shards_[s].path());
    }
  }
  return d;
}

const SafetensorsFile& SafetensorsDir::file_of(const std::string& name) const {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) fail("{}: no tensor named '{}'", path_, name);
  return shards_[it->second];
}

void write_sharded(const std::string& dir, const SafetensorsWriter& tensors, uint64_t max_shard_bytes) {
  std::vector<SafetensorsWriter> shards = tensors.split(max_shard_bytes);
  std::error_code ec;
  fs::create_directories(dir, ec);
  ZAYA_CHECK(!ec, "{}: cannot create directory: {}", dir, ec.message());
  const fs::path index_path = fs::path(dir) / kSafetensorsIndexFile;

  if (shards.size() <= 1) {
    tensors.write((fs::path(dir) / kSafetensorsSingleFile).string());
    fs::remove(index_path, ec);
    ZAYA_CHECK(!ec, "{}: cannot remove the stale index: {}", index_path.string(), ec.message());
    return;
  }

  // nlohmann::json (not ordered) sorts weight_map by tensor name, as Hugging Face writes it.
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string file_name = shard_file_name(i, shards.size());
    shards[i].write((fs::path(dir) / file_name).string());
    for (const auto& t : shards[i].tensors()) weight_map[t.name] = file_name;
  }
  nlohmann::json index = {{"metadata", {{"total_size", tensors.data_bytes()}}}, {"weight_map", weight_map}};
  write_file_atomic(index_path.string(), index.dump(2) + "\n");
}

}  // namespace zaya
