#include "zaya/io/gguf_format.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "zaya/core/mxfp4.h"
#include "zaya/core/q8_0.h"

namespace zaya {

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kU8: return "uint8";
    case GgufType::kI8: return "int8";
    case GgufType::kU16: return "uint16";
    case GgufType::kI16: return "int16";
    case GgufType::kU32: return "uint32";
    case GgufType::kI32: return "int32";
    case GgufType::kF32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "uint64";
    case GgufType::kI64: return "int64";
    case GgufType::kF64: return "float64";
  }
  return "unknown";
}

std::optional<GgufType> gguf_type_from_raw(uint32_t raw) {
  if (raw > static_cast<uint32_t>(GgufType::kF64)) return std::nullopt;
  return static_cast<GgufType>(raw);
}

size_t gguf_type_size(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool: return 1;
    case GgufType::kU16:
    case GgufType::kI16: return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32: return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

bool gguf_type_is_integer(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64: return true;
    default: return false;
  }
}

std::optional<GgmlType> ggml_type_from_raw(uint32_t raw) {
  switch (raw) {
    case 0: return GgmlType::kF32;
    case 1: return GgmlType::kF16;
    case 8: return GgmlType::kQ8_0;
    case 24: return GgmlType::kI8;
    case 25: return GgmlType::kI16;
    case 26: return GgmlType::kI32;
    case 27: return GgmlType::kI64;
    case 28: return GgmlType::kF64;
    case 30: return GgmlType::kBF16;
    case 39: return GgmlType::kMXFP4;
    default: return std::nullopt;
  }
}

std::string_view ggml_type_name(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kQ8_0: return "Q8_0";
    case GgmlType::kI8: return "I8";
    case GgmlType::kI16: return "I16";
    case GgmlType::kI32: return "I32";
    case GgmlType::kI64: return "I64";
    case GgmlType::kF64: return "F64";
    case GgmlType::kBF16: return "BF16";
    case GgmlType::kMXFP4: return "MXFP4";
  }
  return "unknown";
}

std::string ggml_raw_type_name(uint32_t raw) {
  // enum ggml_type as of GGML_TYPE_COUNT = 40; empty entries were removed from the format.
  static constexpr std::array<std::string_view, 40> kNames = {
      "F32",    "F16",   "Q4_0",  "Q4_1",   "",      "",      "Q5_0",    "Q5_1",   "Q8_0",    "Q8_1",
      "Q2_K",   "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",    "I16",   "I32",     "I64",    "F64",     "IQ1_M",
      "BF16",   "",      "",      "",       "TQ1_0", "TQ2_0", "",        "",       "",        "MXFP4"};
  if (raw < kNames.size() && !kNames[raw].empty()) return std::string(kNames[raw]);
  return "unknown";
}

size_t ggml_type_size(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0: return size_t(kQ8BlockBytes);
    case GgmlType::kMXFP4: return size_t(kGgmlMxfp4BlockBytes);
    case GgmlType::kI8: return 1;
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kI16: return 2;
    case GgmlType::kF32:
    case GgmlType::kI32: return 4;
    case GgmlType::kI64:
    case GgmlType::kF64: return 8;
  }
  return 0;
}

int64_t ggml_block_size(GgmlType type) {
  return type == GgmlType::kQ8_0 ? kQ8Block : type == GgmlType::kMXFP4 ? kMxBlock : 1;
}

uint64_t ggml_nbytes(GgmlType type, uint64_t numel) {
  return numel / uint64_t(ggml_block_size(type)) * ggml_type_size(type);
}

bool ggml_type_is_float(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 || type == GgmlType::kF64;
}

bool gguf_align_up(uint64_t offset, uint64_t alignment, uint64_t* out) {
  const uint64_t mask = alignment - 1;
  if (offset > UINT64_MAX - mask) return false;
  *out = (offset + mask) & ~mask;
  return true;
}

}  // namespace zaya
