#include "zaya/io/gguf_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/q8_0.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/utf8.h"

namespace zaya {
namespace {

// Elements converted per write (F16/BF16/F64 output).
constexpr size_t kChunkElements = size_t{1} << 16;

void append_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void append_string(std::string& out, std::string_view s) {
  append_u64(out, s.size());
  out.append(s);
}

// Hierarchical lower_snake_case: segments of [a-z0-9_] separated by single dots.
bool is_snake_case_key(std::string_view key) {
  if (key.empty() || key.size() > kGgufMaxKeyBytes || key.front() == '.' || key.back() == '.') return false;
  char prev = 0;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (c == '.' && prev != '.');
    if (!ok) return false;
    prev = c;
  }
  return true;
}

// Converts n floats into `type`'s encoding at dst.
void encode_floats(GgmlType type, const float* src, size_t n, uint8_t* dst) {
  switch (type) {
    case GgmlType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = float_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::kF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = float_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::kF64:
      for (size_t i = 0; i < n; ++i) {
        const double d = src[i];
        std::memcpy(dst + 8 * i, &d, 8);
      }
      return;
    case GgmlType::kQ8_0: quantize_q8_0(src, int64_t(n), dst); return;
    case GgmlType::kMXFP4:  // each block as zaya's MXFP4 quantization gives it (core/mxfp4.h), in ggml's layout
      for (size_t b = 0; b < n / size_t(kMxBlock); ++b) {
        uint8_t row[mxfp4_row_bytes(kMxBlock)];
        quantize_mxfp4_row(src + b * size_t(kMxBlock), kMxBlock, row);
        mxfp4_row_to_ggml(row, kMxBlock, dst + b * size_t(kGgmlMxfp4BlockBytes));
      }
      return;
    default: fail("internal error: cannot encode floats as {}", ggml_type_name(type));
  }
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  ZAYA_CHECK(
      alignment >= 8 && alignment % 8 == 0 && (alignment & (alignment - 1)) == 0 && alignment <= kGgufMaxAlignment,
      "GGUF alignment {} is invalid; allowed: a power of two from 8 to {}", alignment, kGgufMaxAlignment);
}

void GgufWriter::set(std::string key, GgufValue value) {
  ZAYA_CHECK(is_snake_case_key(key),
             "GGUF metadata key '{}' is invalid; keys are lower_snake_case segments separated by dots, at most {} "
             "bytes",
             printable(key), kGgufMaxKeyBytes);
  ZAYA_CHECK(key != kGgufAlignmentKey, "GGUF metadata key '{}' is written by the writer (set it in the constructor)",
             key);
  metadata_.add(std::move(key), std::move(value));
}

GgufWriter::Tensor& GgufWriter::add(std::string name, std::vector<int64_t> shape, GgmlType type) {
  ZAYA_CHECK(!name.empty() && name.size() <= kGgufMaxWrittenTensorNameBytes && name.find('\0') == std::string::npos &&
                 is_valid_utf8(name),
             "GGUF tensor name '{}' is invalid; allowed: 1 to {} bytes of UTF-8 (ggml's limit)", printable(name),
             kGgufMaxWrittenTensorNameBytes);
  ZAYA_CHECK(names_.insert(name).second, "GGUF tensor '{}' added twice", name);
  ZAYA_CHECK(shape.size() <= kGgufMaxDims, "GGUF tensor '{}': {} dimensions, at most {} allowed", name, shape.size(),
             kGgufMaxDims);
  int64_t numel = 1;
  for (int64_t d : shape)
    ZAYA_CHECK(d >= 0 && !__builtin_mul_overflow(numel, d, &numel),
               "GGUF tensor '{}': shape [{}] is invalid (negative or more than 2^63-1 elements)", name,
               fmt::join(shape, ", "));
  const int64_t block = ggml_block_size(type);
  ZAYA_CHECK(block == 1 || (!shape.empty() && shape.back() % block == 0),
             "GGUF tensor '{}': shape [{}] cannot be stored as {}: its rows (the last dimension) must be a multiple of "
             "{} elements",
             name, fmt::join(shape, ", "), ggml_type_name(type), block);
  Tensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.type = type;
  t.numel = numel;
  ZAYA_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel / block), ggml_type_size(type), &t.nbytes),
             "GGUF tensor '{}' is too large", t.name);
  t.offset = data_bytes_;
  uint64_t end = 0;
  ZAYA_CHECK(!__builtin_add_overflow(t.offset, t.nbytes, &end) && gguf_align_up(end, alignment_, &data_bytes_),
             "GGUF tensor '{}' is too large", t.name);
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

void GgufWriter::add_f32(std::string name, std::vector<int64_t> shape, const float* src, GgmlType type) {
  int64_t numel = 1;  // only sizes the span; add() reports a bad shape
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) {
      numel = 0;
      break;
    }
  add_f32_pieces(std::move(name), std::move(shape), {std::span<const float>(src, size_t(numel))}, type);
}

void GgufWriter::add_f32_pieces(std::string name, std::vector<int64_t> shape,
                                std::vector<std::span<const float>> pieces, GgmlType type) {
  ZAYA_CHECK(ggml_type_is_float(type) || type == GgmlType::kQ8_0 || type == GgmlType::kMXFP4,
             "GGUF tensor '{}': floats cannot be stored as {}", name, ggml_type_name(type));
  Tensor& t = add(std::move(name), std::move(shape), type);
  uint64_t total = 0;
  for (const auto& p : pieces) {
    ZAYA_CHECK(p.data() != nullptr || p.empty(), "GGUF tensor '{}': null source data", t.name);
    ZAYA_CHECK(p.size() % uint64_t(ggml_block_size(type)) == 0,
               "GGUF tensor '{}': a piece of {} floats is not whole {} blocks of {}", t.name, p.size(),
               ggml_type_name(type), ggml_block_size(type));
    total += p.size();
  }
  ZAYA_CHECK(total == static_cast<uint64_t>(t.numel), "GGUF tensor '{}': the pieces hold {} floats, the shape {}",
             t.name, total, t.numel);
  t.pieces = std::move(pieces);
}

void GgufWriter::add_raw(std::string name, std::vector<int64_t> shape, GgmlType type, const void* data) {
  Tensor& t = add(std::move(name), std::move(shape), type);
  ZAYA_CHECK(data != nullptr || t.nbytes == 0, "GGUF tensor '{}': null source data", t.name);
  t.raw = data;
}

std::string GgufWriter::encode_head() const {
  std::string out(kGgufMagic, sizeof(kGgufMagic));
  append_u32(out, kGgufVersion);
  append_u64(out, tensors_.size());
  append_u64(out, metadata_.size() + 1);  // + general.alignment
  for (const GgufKeyValue& kv : metadata_.entries()) {
    append_string(out, kv.key);
    append_u32(out, static_cast<uint32_t>(kv.value.type()));
    kv.value.encode(out);
  }
  append_string(out, kGgufAlignmentKey);
  append_u32(out, static_cast<uint32_t>(GgufType::kU32));
  append_u32(out, alignment_);
  for (const Tensor& t : tensors_) {
    append_string(out, t.name);
    append_u32(out, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) append_u64(out, static_cast<uint64_t>(*d));
    append_u32(out, static_cast<uint32_t>(t.type));
    append_u64(out, t.offset);
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, '\0');
  return out;
}

uint64_t GgufWriter::file_size() const { return encode_head().size() + data_bytes_; }

void GgufWriter::write(const std::string& path) const {
  AtomicFileWriter out(path);
  out.write(encode_head());
  const uint64_t data_start = out.size();
  std::vector<uint8_t> buffer;
  const std::string zeros(alignment_, '\0');
  for (const Tensor& t : tensors_) {
    ZAYA_ASSERT(out.size() == data_start + t.offset);
    if (t.raw != nullptr) {
      out.write(t.raw, t.nbytes);
    } else if (t.type == GgmlType::kF32) {
      for (const auto& p : t.pieces) out.write(p.data(), p.size_bytes());
    } else {
      buffer.resize(ggml_nbytes(t.type, kChunkElements));  // kChunkElements: whole blocks
      for (const auto& p : t.pieces)
        for (size_t i = 0; i < p.size(); i += kChunkElements) {
          const size_t n = std::min(kChunkElements, p.size() - i);
          encode_floats(t.type, p.data() + i, n, buffer.data());
          out.write(buffer.data(), ggml_nbytes(t.type, n));
        }
    }
    const uint64_t pad = (alignment_ - (t.nbytes % alignment_)) % alignment_;
    out.write(zeros.data(), pad);
  }
  ZAYA_ASSERT(out.size() == data_start + data_bytes_);
  out.commit();
}

}  // namespace zaya
