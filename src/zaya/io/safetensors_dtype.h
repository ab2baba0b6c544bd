#pragma once
// Element types of the safetensors format, spelled as in the file header.
// The set is the reference implementation's stable byte-sized dtypes; the
// sub-byte micro-float types (F4, F6_*) of newer releases are not accepted.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace zaya {

enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// "F32", "BF16", ... as written in headers.
std::string_view dtype_name(SafetensorsDtype dtype);

// Bytes per element.
size_t dtype_size(SafetensorsDtype dtype);

// Parses a header dtype string; nullopt if it is not one of the names above.
std::optional<SafetensorsDtype> parse_dtype(std::string_view name);

// All accepted names, comma separated (for error messages).
std::string known_dtype_names();

}  // namespace zaya
