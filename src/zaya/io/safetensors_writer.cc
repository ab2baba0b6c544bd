#include "zaya/io/safetensors_writer.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <nlohmann/json.hpp>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/safetensors_header.h"

namespace zaya {

// Tensor bytes are written straight from host memory.
static_assert(std::endian::native == std::endian::little, "safetensors writer assumes a little-endian host");

namespace {

using Json = nlohmann::ordered_json;

// Elements converted per write() call when rounding floats to BF16.
constexpr int64_t kConvertChunk = int64_t{1} << 15;

// Order in which tensors are laid out in the data buffer: widest element
// first, so that with an 8-aligned buffer start every tensor is naturally aligned.
std::vector<size_t> data_order(const std::vector<SafetensorsWriter::Tensor>& tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return dtype_size(tensors[a].dtype) > dtype_size(tensors[b].dtype); });
  return order;
}

std::string build_header(const std::string& path, const std::vector<SafetensorsWriter::Tensor>& tensors,
                         const std::vector<uint64_t>& begin, const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {begin[i], begin[i] + t.nbytes}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: tensor names and metadata must be valid UTF-8: {}", path, e.what());
  }
  // Pad so that 8 (length field) + header length is a multiple of 8.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void write_tensor_data(AtomicFileWriter& out, const SafetensorsWriter::Tensor& t) {
  if (!t.from_float) {
    out.write(t.src, t.nbytes);
    return;
  }
  ZAYA_ASSERT(t.dtype == SafetensorsDtype::kBF16);
  const auto* src = static_cast<const float*>(t.src);
  const int64_t n = static_cast<int64_t>(t.nbytes / sizeof(uint16_t));
  std::vector<uint16_t> chunk(static_cast<size_t>(std::min(n, kConvertChunk)));
  for (int64_t start = 0; start < n; start += kConvertChunk) {
    int64_t count = std::min(kConvertChunk, n - start);
    for (int64_t i = 0; i < count; ++i) chunk[i] = float_to_bf16(src[start + i]);
    out.write(chunk.data(), static_cast<size_t>(count) * sizeof(uint16_t));
  }
}

}  // namespace

void SafetensorsWriter::add(std::string name, SafetensorsDtype dtype, std::vector<int64_t> shape, const void* src,
                            bool from_float) {
  ZAYA_CHECK(!name.empty(), "safetensors writer: tensor name is empty");
  ZAYA_CHECK(name != "__metadata__", "safetensors writer: '__metadata__' is reserved and cannot name a tensor");
  ZAYA_CHECK(!names_.count(name), "safetensors writer: tensor '{}' added twice", name);
  uint64_t numel = 1;
  for (int64_t dim : shape) {
    ZAYA_CHECK(dim >= 0, "safetensors writer: tensor '{}': shape {} has a negative dimension", name,
               format_shape(shape));
    ZAYA_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel) &&
                   numel <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
               "safetensors writer: tensor '{}': shape {} has too many elements", name, format_shape(shape));
  }
  ZAYA_CHECK(numel == 0 || src != nullptr, "safetensors writer: tensor '{}': source pointer is null", name);
  Tensor t;
  t.nbytes = numel * dtype_size(dtype);
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.src = src;
  t.from_float = from_float;
  names_.insert(t.name);
  data_bytes_ += t.nbytes;
  tensors_.push_back(std::move(t));
}

void SafetensorsWriter::add_f32(std::string name, std::vector<int64_t> shape, const float* src) {
  add(std::move(name), SafetensorsDtype::kF32, std::move(shape), src, false);
}

void SafetensorsWriter::add_bf16(std::string name, std::vector<int64_t> shape, const float* src) {
  add(std::move(name), SafetensorsDtype::kBF16, std::move(shape), src, true);
}

void SafetensorsWriter::add_i32(std::string name, std::vector<int64_t> shape, const int32_t* src) {
  add(std::move(name), SafetensorsDtype::kI32, std::move(shape), src, false);
}

void SafetensorsWriter::add_raw(std::string name, SafetensorsDtype dtype, std::vector<int64_t> shape, const void* src) {
  add(std::move(name), dtype, std::move(shape), src, false);
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

void SafetensorsWriter::write(const std::string& path) const {
  std::vector<size_t> order = data_order(tensors_);
  std::vector<uint64_t> begin(tensors_.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    begin[i] = offset;
    offset += tensors_[i].nbytes;
  }
  const std::string header = build_header(path, tensors_, begin, metadata_);

  AtomicFileWriter out(path);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.write(length, sizeof(length));
  out.write(header);
  for (size_t i : order) write_tensor_data(out, tensors_[i]);
  ZAYA_ASSERT(out.size() == 8 + header.size() + data_bytes_);
  out.commit();
}

std::vector<size_t> SafetensorsWriter::shard_starts(const std::vector<uint64_t>& nbytes, uint64_t max_shard_bytes) {
  ZAYA_CHECK(max_shard_bytes > 0, "safetensors writer: max shard size must be positive");
  std::vector<size_t> starts;
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < nbytes.size(); ++i) {
    if (starts.empty() || (i > starts.back() && shard_bytes + nbytes[i] > max_shard_bytes)) {
      starts.push_back(i);
      shard_bytes = 0;
    }
    shard_bytes += nbytes[i];
  }
  return starts;
}

std::vector<SafetensorsWriter> SafetensorsWriter::split(uint64_t max_shard_bytes) const {
  std::vector<uint64_t> nbytes;
  for (const Tensor& t : tensors_) nbytes.push_back(t.nbytes);
  const std::vector<size_t> starts = shard_starts(nbytes, max_shard_bytes);
  std::vector<SafetensorsWriter> shards(starts.size());
  for (size_t s = 0; s < starts.size(); ++s) {
    SafetensorsWriter& shard = shards[s];
    shard.metadata_ = metadata_;
    const size_t end = s + 1 < starts.size() ? starts[s + 1] : tensors_.size();
    for (size_t i = starts[s]; i < end; ++i) {
      shard.names_.insert(tensors_[i].name);
      shard.data_bytes_ += tensors_[i].nbytes;
      shard.tensors_.push_back(tensors_[i]);
    }
  }
  return shards;
}

}  // namespace zaya
