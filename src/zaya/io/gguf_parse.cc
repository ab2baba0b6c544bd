#include "zaya/io/gguf_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/q8_0.h"
#include "zaya/io/utf8.h"

namespace zaya {
namespace {

constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;
// The smallest possible encodings, used to reject counts that the bytes left
// cannot hold before anything is allocated for them.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;              // key length, 1-byte key, value type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 4 + 8;  // name length, 1-byte name, n_dims, type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;                   // element type, element count
constexpr uint64_t kStringLengthBytes = 8;
constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// A bounds-checked little-endian cursor over the file. Every read first checks
// that the bytes exist; a failure names the file, the current context (the key
// or tensor being parsed) and the field.
class Reader {
 public:
  Reader(std::string_view label, std::span<const uint8_t> file) : label_(label), file_(file) {}

  uint64_t pos() const { return pos_; }
  uint64_t nested_elements = 0;  // elements of nested arrays so far (kGgufMaxNestedArrayElements)
  uint64_t remaining() const { return file_.size() - pos_; }
  void set_context(std::string context) { context_ = std::move(context); }

  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: {}: {}", label_, context_, fmt::format(format, std::forward<Args>(args)...));
  }

  void need(uint64_t n, std::string_view field) const {
    if (n > remaining())
      error("{} at byte {} needs {} bytes, but the file ends {} bytes later (truncated?)", field, pos_, n, remaining());
  }

  const uint8_t* take(uint64_t n, std::string_view field) {
    need(n, field);
    const uint8_t* p = file_.data() + pos_;
    pos_ += n;
    return p;
  }

  // An unsigned little-endian integer of `bytes` bytes (1, 2, 4 or 8).
  uint64_t uint(size_t bytes, std::string_view field) {
    const uint8_t* p = take(bytes, field);
    uint64_t v = 0;
    for (size_t i = bytes; i-- > 0;) v = (v << 8) | p[i];
    return v;
  }
  uint32_t u32(std::string_view field) { return static_cast<uint32_t>(uint(4, field)); }
  uint64_t u64(std::string_view field) { return uint(8, field); }

  // A GGUF string: u64 length, then the bytes. `element` >= 0 names an array element.
  std::string string(std::string_view field, uint64_t max_bytes, int64_t element = -1) {
    const uint64_t at = pos_;
    const uint64_t len = u64(field);
    auto where = [&] {
      return element >= 0 ? fmt::format("{} (array element {})", field, element) : std::string(field);
    };
    if (len > max_bytes)
      error("{} at byte {} is {} bytes long, more than the {}-byte limit", where(), at, len, max_bytes);
    if (len > remaining())
      error("{} at byte {} is {} bytes long, but the file ends {} bytes later (truncated or corrupt)", where(), at, len,
            remaining());
    const uint8_t* p = take(len, field);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
  }

 private:
  std::string_view label_;
  std::span<const uint8_t> file_;
  uint64_t pos_ = 0;
  std::string context_;
};

GgufValue scalar_value(GgufType type, uint64_t bits) {
  switch (type) {
    case GgufType::kU8: return GgufValue::u8(static_cast<uint8_t>(bits));
    case GgufType::kI8: return GgufValue::i8(static_cast<int8_t>(bits));
    case GgufType::kU16: return GgufValue::u16(static_cast<uint16_t>(bits));
    case GgufType::kI16: return GgufValue::i16(static_cast<int16_t>(bits));
    case GgufType::kU32: return GgufValue::u32(static_cast<uint32_t>(bits));
    case GgufType::kI32: return GgufValue::i32(static_cast<int32_t>(bits));
    case GgufType::kU64: return GgufValue::u64(bits);
    case GgufType::kI64: return GgufValue::i64(static_cast<int64_t>(bits));
    case GgufType::kBool: return GgufValue::boolean(bits != 0);
    case GgufType::kF32: {
      float f;
      const auto b = static_cast<uint32_t>(bits);
      std::memcpy(&f, &b, sizeof(f));
      return GgufValue::f32(f);
    }
    case GgufType::kF64: {
      double d;
      std::memcpy(&d, &bits, sizeof(d));
      return GgufValue::f64(d);
    }
    default: break;
  }
  fail("internal error: {} is not a fixed-size GGUF type", gguf_type_name(type));
}

GgufType read_type(Reader& r, std::string_view field) {
  const uint64_t at = r.pos();
  const uint32_t raw = r.u32(field);
  auto type = gguf_type_from_raw(raw);
  if (!type) r.error("{} at byte {} is {}, not a GGUF value type (0..12)", field, at, raw);
  return *type;
}

GgufValue parse_value(Reader& r, GgufType type, int depth);

// An array value: element type, element count, elements. `depth` counts the arrays around it.
GgufValue parse_array(Reader& r, int depth) {
  if (depth > kGgufMaxArrayDepth) r.error("arrays nest more than {} deep", kGgufMaxArrayDepth);
  const GgufType element_type = read_type(r, "array element type");
  const uint64_t at = r.pos();
  const uint64_t count = r.u64("array length");
  const size_t size = gguf_type_size(element_type);
  const uint64_t min_bytes = size > 0 ? size : element_type == GgufType::kString ? kStringLengthBytes : kMinArrayBytes;
  if (count > r.remaining() / min_bytes)
    r.error(
        "array length at byte {} is {} {} elements, which need at least {} bytes each, but the file ends {} "
        "bytes later",
        at, count, gguf_type_name(element_type), min_bytes, r.remaining());
  if (size > 0) {
    const uint64_t start = r.pos();
    const uint8_t* p = r.take(count * size, "array elements");
    if (element_type == GgufType::kBool)
      for (uint64_t i = 0; i < count; ++i)
        if (p[i] > 1) r.error("bool array element {} at byte {} is {}, expected 0 or 1", i, start + i, p[i]);
    return GgufValue::packed(element_type, count, std::string(reinterpret_cast<const char*>(p), count * size));
  }
  if (element_type == GgufType::kString) {
    std::vector<std::string> strings;
    strings.reserve(count);
    for (uint64_t i = 0; i < count; ++i)
      strings.push_back(r.string("string", std::numeric_limits<uint64_t>::max(), static_cast<int64_t>(i)));
    return GgufValue::strings(std::move(strings));
  }
  if (count > kGgufMaxNestedArrayElements - r.nested_elements)
    r.error("array length at byte {} is {} arrays, more than the file's limit of {} nested array elements", at, count,
            kGgufMaxNestedArrayElements);
  r.nested_elements += count;
  std::vector<GgufValue> arrays;
  arrays.reserve(count);
  for (uint64_t i = 0; i < count; ++i) arrays.push_back(parse_array(r, depth + 1));
  return GgufValue::arrays(std::move(arrays));
}

GgufValue parse_value(Reader& r, GgufType type, int depth) {
  if (type == GgufType::kString)
    return GgufValue::string(r.string("string value", std::numeric_limits<uint64_t>::max()));
  if (type == GgufType::kArray) return parse_array(r, depth + 1);
  const uint64_t at = r.pos();
  const uint64_t bits = r.uint(gguf_type_size(type), "value");
  if (type == GgufType::kBool && bits > 1) r.error("bool value at byte {} is {}, expected 0 or 1", at, bits);
  return scalar_value(type, bits);
}

// Keys are ASCII by the spec (hierarchical lower_snake_case); we accept any
// printable ASCII without spaces, which covers every key seen in the wild.
bool is_valid_key(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

uint64_t parse_alignment(std::string_view label, const GgufMetadata& metadata) {
  const GgufValue* v = metadata.find(kGgufAlignmentKey);
  if (v == nullptr) return kGgufDefaultAlignment;
  if (v->type() != GgufType::kU32)
    fail("{}: metadata key '{}' is {}, expected a uint32", label, kGgufAlignmentKey, v->describe());
  const uint64_t a = v->as_uint();
  if (a == 0 || (a & (a - 1)) != 0 || a > kGgufMaxAlignment)
    fail("{}: metadata key '{}' is {}, expected a power of two from 1 to {}", label, kGgufAlignmentKey, a,
         kGgufMaxAlignment);
  return a;
}

GgufTensorInfo parse_tensor_info(Reader& r, uint64_t index, uint64_t alignment,
                                 std::unordered_set<std::string>& names) {
  GgufTensorInfo t;
  r.set_context(fmt::format("tensor info {}", index));
  t.name = r.string("tensor name", kGgufMaxTensorNameBytes);
  if (t.name.empty()) r.error("tensor name is empty");
  if (t.name.find('\0') != std::string::npos || !is_valid_utf8(t.name))
    r.error("tensor name '{}' is not valid UTF-8 text without NUL bytes", printable(t.name));
  r.set_context(fmt::format("tensor '{}'", printable(t.name)));
  if (!names.insert(t.name).second) r.error("a tensor of this name appears twice");

  const uint64_t dims_at = r.pos();
  const uint32_t n_dims = r.u32("n_dims");
  if (n_dims > kGgufMaxDims) r.error("n_dims at byte {} is {}, more than {}", dims_at, n_dims, kGgufMaxDims);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t at = r.pos();
    const uint64_t dim = r.u64("dimension");
    if (dim > kMaxInt64) r.error("dimension {} at byte {} is {}, larger than 2^63-1", d, at, dim);
    t.dims.push_back(static_cast<int64_t>(dim));
  }
  for (int64_t dim : t.dims)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel) || numel > kMaxInt64)
      r.error("dimensions [{}] hold more than 2^63-1 elements", fmt::join(t.dims, ", "));
  t.numel = static_cast<int64_t>(numel);
  t.shape.assign(t.dims.rbegin(), t.dims.rend());

  const uint64_t type_at = r.pos();
  const uint32_t raw_type = r.u32("ggml type");
  auto type = ggml_type_from_raw(raw_type);
  if (!type) {
    const std::string name = ggml_raw_type_name(raw_type);
    if (name == "unknown") r.error("ggml type at byte {} is {}, which is not a ggml type", type_at, raw_type);
    r.error("ggml type is {} ({}), a quantised type; zaya.cpp reads F32, F16, BF16, F64, Q8_0, I8, I16, I32 and I64",
            name, raw_type);
  }
  t.type = *type;
  // ggml's rule for block types: whole blocks along the innermost axis.
  const int64_t block = ggml_block_size(t.type);
  if (block > 1 && (t.dims.empty() || t.dims[0] % block != 0))
    r.error(
        "ggml type {} stores blocks of {} elements along the innermost dimension, but dimensions [{}] have rows "
        "of {} elements (not a multiple of {})",
        ggml_type_name(t.type), block, fmt::join(t.dims, ", "), t.dims.empty() ? 1 : t.dims[0], block);
  if (__builtin_mul_overflow(numel / uint64_t(block), static_cast<uint64_t>(ggml_type_size(t.type)), &t.nbytes))
    r.error("{} elements of {} need more than 2^64 bytes", numel, ggml_type_name(t.type));

  const uint64_t offset_at = r.pos();
  t.offset = r.u64("data offset");
  if (t.offset % alignment != 0)
    r.error("data offset at byte {} is {}, not a multiple of the alignment {}", offset_at, t.offset, alignment);
  return t;
}

// Two tensors overlap when they share a byte; empty tensors share none. After
// sorting by offset, any overlap shows up between neighbours.
void check_overlaps(std::string_view label, const std::vector<GgufTensorInfo>& tensors) {
  std::vector<const GgufTensorInfo*> sorted;
  for (const auto& t : tensors)
    if (t.nbytes > 0) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const auto& a = *sorted[i - 1];
    const auto& b = *sorted[i];
    if (a.offset + a.nbytes > b.offset)  // no overflow: both ranges were checked to lie in the file
      fail("{}: tensors '{}' (data offset {}, {} bytes) and '{}' (data offset {}, {} bytes) overlap", label,
           printable(a.name), a.offset, a.nbytes, printable(b.name), b.offset, b.nbytes);
  }
}

}  // namespace

GgufLayout parse_gguf_layout(std::string_view label, std::span<const uint8_t> file) {
  if (file.size() < kHeaderBytes)
    fail("{}: file is {} bytes, too short for the {}-byte GGUF header (truncated, or not a GGUF file)", label,
         file.size(), kHeaderBytes);
  if (std::memcmp(file.data(), kGgufMagic, sizeof(kGgufMagic)) != 0)
    fail("{}: magic is '{}', expected 'GGUF' (not a GGUF file)", label,
         printable(std::string_view(reinterpret_cast<const char*>(file.data()), 4)));

  Reader r(label, file);
  r.set_context("header");
  r.take(4, "magic");
  GgufLayout layout;
  layout.metadata = GgufMetadata(std::string(label));
  layout.version = r.u32("version");
  if (layout.version == 1) fail("{}: GGUF version 1 is obsolete and not supported; expected version 3", label);
  if (layout.version != 0 && (layout.version & 0xffffu) == 0)
    fail("{}: GGUF version reads as {:#x}: a big-endian file? Only little-endian GGUF is supported", label,
         layout.version);
  if (layout.version != 2 && layout.version != kGgufVersion)
    fail("{}: GGUF version {} is not supported; expected {} (version 2 has the same layout and is accepted too)", label,
         layout.version, kGgufVersion);
  const uint64_t tensor_count = r.u64("tensor count");
  const uint64_t kv_count = r.u64("metadata count");
  if (kv_count > r.remaining() / kMinKvBytes)
    fail("{}: header claims {} metadata pairs, but the remaining {} bytes can hold at most {}", label, kv_count,
         r.remaining(), r.remaining() / kMinKvBytes);
  if (tensor_count > r.remaining() / kMinTensorInfoBytes)
    fail("{}: header claims {} tensors, but the remaining {} bytes can hold at most {} tensor infos", label,
         tensor_count, r.remaining(), r.remaining() / kMinTensorInfoBytes);

  for (uint64_t i = 0; i < kv_count; ++i) {
    r.set_context(fmt::format("metadata pair {} of {}", i, kv_count));
    std::string key = r.string("key", kGgufMaxKeyBytes);
    if (!is_valid_key(key)) r.error("key '{}' is not a GGUF key (printable ASCII without spaces)", printable(key));
    r.set_context(fmt::format("metadata key '{}'", key));
    if (layout.metadata.has(key)) r.error("the key appears twice");
    const GgufType type = read_type(r, "value type");
    layout.metadata.add(std::move(key), parse_value(r, type, 0));
  }
  layout.alignment = parse_alignment(label, layout.metadata);

  if (tensor_count > r.remaining() / kMinTensorInfoBytes)
    fail("{}: header claims {} tensors, but the {} bytes after the metadata can hold at most {} tensor infos", label,
         tensor_count, r.remaining(), r.remaining() / kMinTensorInfoBytes);
  std::unordered_set<std::string> names;
  layout.tensors.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i)
    layout.tensors.push_back(parse_tensor_info(r, i, layout.alignment, names));

  // The data section starts at the end of the tensor infos, rounded up to the alignment.
  if (!gguf_align_up(r.pos(), layout.alignment, &layout.data_offset)) layout.data_offset = UINT64_MAX;
  if (layout.data_offset <= file.size()) {
    layout.data_size = file.size() - layout.data_offset;
  } else if (!layout.tensors.empty()) {
    fail(
        "{}: the tensor data section would start at byte {} (the end of the tensor infos, {}, rounded up to the "
        "alignment {}), past the end of the {}-byte file (truncated?)",
        label, layout.data_offset, r.pos(), layout.alignment, file.size());
  }
  for (const GgufTensorInfo& t : layout.tensors)
    if (t.offset > layout.data_size || t.nbytes > layout.data_size - t.offset)
      fail(
          "{}: tensor '{}': data at offset {} ({} bytes of {} {}) runs past the end of the {}-byte data section "
          "(truncated file?)",
          label, printable(t.name), t.offset, t.nbytes, t.numel, ggml_type_name(t.type), layout.data_size);
  check_overlaps(label, layout.tensors);
  return layout;
}

void gguf_convert_to_f32(std::string_view label, std::string_view name, GgmlType type, std::span<const uint8_t> src,
                         float* dst, uint64_t count, uint64_t first) {
  if (type == GgmlType::kQ8_0) {  // whole blocks (callers start and end ranges on block boundaries)
    ZAYA_ASSERT(count % uint64_t(kQ8Block) == 0 && ggml_nbytes(type, count) <= src.size());
    const auto blocks = static_cast<int64_t>(count / uint64_t(kQ8Block));
#pragma omp parallel for schedule(static) if (blocks >= 2048)
    for (int64_t b = 0; b < blocks; ++b) dequantize_q8_0(src.data() + b * kQ8BlockBytes, kQ8Block, dst + b * kQ8Block);
    return;
  }
  if (type == GgmlType::kMXFP4) {  // whole blocks, as Q8_0; the exact values e2m1 * 2^(u - 127)
    ZAYA_ASSERT(count % uint64_t(kMxBlock) == 0 && ggml_nbytes(type, count) <= src.size());
    const auto blocks = static_cast<int64_t>(count / uint64_t(kMxBlock));
    for (int64_t b = 0; b < blocks; ++b)  // the E8M0 byte 255 is NaN in the MX spec: refused, never read as a number
      if (src[size_t(b) * size_t(kGgmlMxfp4BlockBytes)] == kE8M0Nan)
        fail(
            "{}: tensor '{}': MXFP4 block {} (elements [{}, +32)) has scale byte 255 (NaN in the MX spec); a "
            "valid E8M0 scale is 0-254",
            label, printable(name), first / uint64_t(kMxBlock) + uint64_t(b), first + uint64_t(b) * uint64_t(kMxBlock));
#pragma omp parallel for schedule(static) if (blocks >= 2048)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t row[mxfp4_row_bytes(kMxBlock)];
      mxfp4_row_from_ggml(src.data() + b * kGgmlMxfp4BlockBytes, kMxBlock, row);
      dequantize_mxfp4_row(row, kMxBlock, dst + b * kMxBlock);
    }
    return;
  }
  const size_t size = ggml_type_size(type);
  ZAYA_ASSERT(count <= src.size() / size);
  const uint8_t* p = src.data();
  const auto n = static_cast<int64_t>(count);
  auto load16 = [p](int64_t i) {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  };
  switch (type) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(dst, p, count * sizeof(float));
      return;
    case GgmlType::kBF16:
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(load16(i));
      return;
    case GgmlType::kF16:
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(load16(i));
      return;
    case GgmlType::kF64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      }
      return;
    default:
      fail("{}: tensor '{}' has ggml type {}; only F32, F16, BF16, F64 and Q8_0 tensors convert to float", label,
           printable(name), ggml_type_name(type));
  }
}

bool gguf_same_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  auto strip = [](const std::vector<int64_t>& s) {
    size_t i = 0;
    while (i < s.size() && s[i] == 1) ++i;
    return std::vector<int64_t>(s.begin() + static_cast<std::ptrdiff_t>(i), s.end());
  };
  return strip(a) == strip(b);
}

}  // namespace zaya
