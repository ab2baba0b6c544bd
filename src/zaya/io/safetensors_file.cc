#include "zaya/io/safetensors_file.h"

#include <bit>
#include <cstring>
#include <utility>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"

namespace zaya {

// The format is little-endian; the readers copy bytes straight into host values.
static_assert(std::endian::native == std::endian::little, "safetensors reader assumes a little-endian host");

namespace {

// Below this many elements a parallel region costs more than the conversion.
constexpr int64_t kParallelMinElements = int64_t{1} << 16;

// Loads element i of a little-endian array that may be unaligned in the mapping.
template <typename T>
T load(const uint8_t* src, int64_t i) {
  T v;
  std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <typename Convert>
void convert_f32(float* dst, int64_t n, Convert convert) {
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) dst[i] = convert(i);
}

// Copies integers of type T into int32, stopping at the first value out of
// range; returns its index, or -1 if all fit.
template <typename T>
int64_t narrow_to_i32(int32_t* dst, const uint8_t* src, int64_t n, T* bad_value) {
  for (int64_t i = 0; i < n; ++i) {
    T v = load<T>(src, i);
    if (!std::in_range<int32_t>(v)) {
      *bad_value = v;
      return i;
    }
    dst[i] = static_cast<int32_t>(v);
  }
  return -1;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  MappedFile file(path);
  SafetensorsLayout layout = parse_safetensors_layout(path, file.bytes());
  return SafetensorsFile(std::move(file), std::move(layout));
}

SafetensorsFile::SafetensorsFile(MappedFile file, SafetensorsLayout layout)
    : file_(std::move(file)), layout_(std::move(layout)) {
  index_.reserve(layout_.tensors.size());
  for (size_t i = 0; i < layout_.tensors.size(); ++i) index_.emplace(layout_.tensors[i].name, i);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(layout_.tensors.size());
  for (const auto& t : layout_.tensors) out.push_back(t.name);
  return out;
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("{}: no tensor named '{}'", path(), name);
  return layout_.tensors[it->second];
}

std::span<const uint8_t> SafetensorsFile::data_buffer() const {
  return file_.bytes().subspan(layout_.data_start, layout_.data_size);
}

std::span<const uint8_t> SafetensorsFile::bytes(const std::string& name) const {
  const SafetensorsTensorInfo& t = info(name);
  return data_buffer().subspan(t.begin, t.nbytes());
}

void SafetensorsFile::check_shape(const SafetensorsTensorInfo& t, const std::vector<int64_t>& expected) const {
  if (t.shape != expected)
    fail("{}: tensor '{}': expected shape {}, found {}", path(), t.name, format_shape(expected), format_shape(t.shape));
}

void SafetensorsFile::read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const {
  const SafetensorsTensorInfo& t = info(name);
  check_shape(t, expected_shape);
  const uint8_t* src = bytes(name).data();
  const int64_t n = t.numel;
  switch (t.dtype) {
    case SafetensorsDtype::kF32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case SafetensorsDtype::kBF16:
      convert_f32(dst, n, [src](int64_t i) { return bf16_to_float(load<uint16_t>(src, i)); });
      return;
    case SafetensorsDtype::kF16:
      convert_f32(dst, n, [src](int64_t i) { return f16_to_float(load<uint16_t>(src, i)); });
      return;
    case SafetensorsDtype::kF64:
      convert_f32(dst, n, [src](int64_t i) { return static_cast<float>(load<double>(src, i)); });
      return;
    default:
      fail("{}: tensor '{}' has dtype {}; read_f32 accepts F32, BF16, F16 or F64", path(), name, dtype_name(t.dtype));
  }
}

void SafetensorsFile::read_i32(const std::string& name, int32_t* dst,
                               const std::vector<int64_t>& expected_shape) const {
  const SafetensorsTensorInfo& t = info(name);
  check_shape(t, expected_shape);
  const uint8_t* src = bytes(name).data();
  const int64_t n = t.numel;
  auto narrow = [&](auto tag) {
    decltype(tag) bad{};
    int64_t i = narrow_to_i32(dst, src, n, &bad);
    if (i >= 0) fail("{}: tensor '{}': element {} is {}, which does not fit in int32", path(), name, i, bad);
  };
  switch (t.dtype) {
    case SafetensorsDtype::kI8: return narrow(int8_t{});
    case SafetensorsDtype::kU8: return narrow(uint8_t{});
    case SafetensorsDtype::kI16: return narrow(int16_t{});
    case SafetensorsDtype::kU16: return narrow(uint16_t{});
    case SafetensorsDtype::kI32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(int32_t));
      return;
    case SafetensorsDtype::kU32: return narrow(uint32_t{});
    case SafetensorsDtype::kI64: return narrow(int64_t{});
    case SafetensorsDtype::kU64: return narrow(uint64_t{});
    default:
      fail("{}: tensor '{}' has dtype {}; read_i32 accepts I8, U8, I16, U16, I32, U32, I64 or U64", path(), name,
           dtype_name(t.dtype));
  }
}

}  // namespace zaya
