#include "zaya/io/gguf.h"

#include <fmt/format.h>

#include <utility>

#include "zaya/core/error.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/io/utf8.h"

namespace zaya {

GgufFile GgufFile::open(const std::string& path) {
  MappedFile file(path);
  GgufLayout layout = parse_gguf_layout(path, file.bytes());
  return GgufFile(std::move(file), std::move(layout));
}

GgufFile::GgufFile(MappedFile file, GgufLayout layout) : file_(std::move(file)), layout_(std::move(layout)) {
  index_.reserve(layout_.tensors.size());
  for (size_t i = 0; i < layout_.tensors.size(); ++i) index_.emplace(layout_.tensors[i].name, i);
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("{}: no tensor named '{}'", path(), printable(name));
  return layout_.tensors[it->second];
}

std::span<const uint8_t> GgufFile::bytes(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  // parse_gguf_layout proved [data_offset + offset, + nbytes) lies inside the file.
  return file_.bytes().subspan(layout_.data_offset + t.offset, t.nbytes);
}

void GgufFile::read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const {
  const GgufTensorInfo& t = tensor(name);
  if (!gguf_same_shape(t.shape, expected_shape))
    fail("{}: tensor '{}': expected shape {}, found {} (ggml dims [{}])", path(), printable(name),
         format_shape(expected_shape), format_shape(t.shape), fmt::join(t.dims, ", "));
  gguf_convert_to_f32(path(), name, t.type, bytes(name), dst, static_cast<uint64_t>(t.numel));
}

std::span<const uint8_t> GgufFile::range_bytes(const std::string& name, uint64_t first, uint64_t count) const {
  const GgufTensorInfo& t = tensor(name);
  const auto numel = static_cast<uint64_t>(t.numel);
  if (first > numel || count > numel - first)
    fail("{}: tensor '{}': elements [{}, +{}) requested, but it has {} elements", path(), printable(name), first, count,
         numel);
  const auto block = static_cast<uint64_t>(ggml_block_size(t.type));
  if (first % block != 0 || count % block != 0)
    fail("{}: tensor '{}': elements [{}, +{}) do not start and end on the {}-element blocks of {}", path(),
         printable(name), first, count, block, ggml_type_name(t.type));
  return bytes(name).subspan(ggml_nbytes(t.type, first), ggml_nbytes(t.type, count));
}

void GgufFile::read_f32_range(const std::string& name, uint64_t first, uint64_t count, float* dst) const {
  const GgufTensorInfo& t = tensor(name);
  gguf_convert_to_f32(path(), name, t.type, range_bytes(name, first, count), dst, count, first);
}

}  // namespace zaya
