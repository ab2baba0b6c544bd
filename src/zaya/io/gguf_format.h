#pragma once
// GGUF v3 constants and type tables (ggml-org/ggml docs/gguf.md), shared by
// the writer (gguf_writer.h) and the reader (gguf_parse.h, gguf.h). Layout of
// a file, all integers little-endian, fields packed without padding:
//
//   "GGUF" | u32 version (3) | u64 tensor_count | u64 kv_count
//   kv_count x  { string key | u32 value type | value }
//   tensor_count x { string name | u32 n_dims | u64 dims[n_dims] (ggml order:
//                    innermost first) | u32 ggml type | u64 offset }
//   zero padding to a multiple of general.alignment (default 32)
//   tensor data: each tensor at `offset` bytes from here, a multiple of the
//   alignment
//
// where a string is { u64 byte length | bytes, no terminator } and an array
// value is { u32 element type | u64 element count | elements }.
// docs/formats-gguf.md describes the format and what zaya.cpp checks.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zaya {

inline constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr std::string_view kGgufAlignmentKey = "general.alignment";

// Limits. The spec's: keys of at most 65535 bytes, tensor names of at most 64
// bytes, at most 4 dimensions. ggml keeps names in a 64-byte buffer with the
// terminating NUL, so the writer stays at 63 bytes to produce files ggml loads.
inline constexpr size_t kGgufMaxKeyBytes = 65535;
inline constexpr size_t kGgufMaxTensorNameBytes = 64;
inline constexpr size_t kGgufMaxWrittenTensorNameBytes = 63;
inline constexpr uint32_t kGgufMaxDims = 4;
// ggml's limit on general.alignment (a power of two): larger values only
// serve to make a hostile file demand huge padding.
inline constexpr uint32_t kGgufMaxAlignment = uint32_t{1} << 20;
// Arrays may nest (the spec allows it; ggml does not); deeper nesting than
// this is rejected so a hostile file cannot exhaust the stack.
inline constexpr int kGgufMaxArrayDepth = 8;
// Elements of nested arrays in one file. Each costs a GgufValue in memory (about
// 12 times its 12 encoded bytes), so their number is capped on its own; files
// in the wild have none (ggml cannot read them).
inline constexpr uint64_t kGgufMaxNestedArrayElements = uint64_t{1} << 20;

// Metadata value types (gguf_metadata_value_type).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "uint32", "string", ... (the spec's names, for messages).
std::string_view gguf_type_name(GgufType type);
// Nullopt if `raw` is not one of the 13 types above.
std::optional<GgufType> gguf_type_from_raw(uint32_t raw);
// Bytes of one value of a fixed-size type; 0 for kString and kArray.
size_t gguf_type_size(GgufType type);
bool gguf_type_is_integer(GgufType type);

// Tensor element types (enum ggml_type). zaya.cpp reads and writes the types
// that are one element per fixed-size slot and Q8_0 (blocks of 32 elements
// along the innermost axis, 34 bytes each: core/q8_0.h); the other
// block-quantised types (Q4_0, Q4_K, IQ*, ...) are recognised by name in error
// messages only.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ8_0 = 8,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kMXFP4 = 39,  // blocks of 32 in 17 bytes (core/mxfp4.h, ggml's block_mxfp4)
};

// Nullopt for a quantised or unknown type.
std::optional<GgmlType> ggml_type_from_raw(uint32_t raw);
// "F32", "BF16", ...
std::string_view ggml_type_name(GgmlType type);
// The name of any raw ggml type value: "Q4_K" for 12, "unknown" outside the table.
std::string ggml_raw_type_name(uint32_t raw);
// Bytes of one block, and elements per block (1 for the plain types; Q8_0: 34 and 32), as ggml's
// type_size and blck_size: a tensor's innermost dimension must be a multiple of the block size.
size_t ggml_type_size(GgmlType type);
int64_t ggml_block_size(GgmlType type);
// Bytes of `numel` elements (a multiple of the block size).
uint64_t ggml_nbytes(GgmlType type, uint64_t numel);
bool ggml_type_is_float(GgmlType type);

// `offset` rounded up to a multiple of `alignment` (a power of two); false on overflow.
bool gguf_align_up(uint64_t offset, uint64_t alignment, uint64_t* out);

}  // namespace zaya
