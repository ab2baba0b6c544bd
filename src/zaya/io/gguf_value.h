#pragma once
// GGUF metadata: typed values (scalars, strings, arrays, nested arrays) and
// the ordered key -> value table of one file, with lookups that check the
// type and name the file and the key when it is wrong.
//
//   GgufMetadata m("model.gguf");
//   m.add("zaya.block_count", GgufValue::u32(40));
//   uint64_t blocks = m.get_uint("zaya.block_count");   // any integer type
//
// Arrays of fixed-size elements keep their elements packed little-endian (as
// in the file), so a hostile array costs no more memory than its bytes.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "zaya/io/gguf_format.h"

namespace zaya {

static_assert(std::endian::native == std::endian::little, "GGUF values are kept in their little-endian encoding");

class GgufValue {
 public:
  GgufValue() = default;  // uint8 0

  static GgufValue u8(uint8_t v) { return scalar(GgufType::kU8, v); }
  static GgufValue i8(int8_t v) { return scalar(GgufType::kI8, static_cast<uint8_t>(v)); }
  static GgufValue u16(uint16_t v) { return scalar(GgufType::kU16, v); }
  static GgufValue i16(int16_t v) { return scalar(GgufType::kI16, static_cast<uint16_t>(v)); }
  static GgufValue u32(uint32_t v) { return scalar(GgufType::kU32, v); }
  static GgufValue i32(int32_t v) { return scalar(GgufType::kI32, static_cast<uint32_t>(v)); }
  static GgufValue u64(uint64_t v) { return scalar(GgufType::kU64, v); }
  static GgufValue i64(int64_t v) { return scalar(GgufType::kI64, static_cast<uint64_t>(v)); }
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v) { return scalar(GgufType::kBool, v ? 1 : 0); }
  static GgufValue string(std::string v);

  // An array of numbers; T picks the element type (uint8_t .. double).
  template <typename T>
  static GgufValue numbers(std::span<const T> values);
  static GgufValue bools(const std::vector<bool>& values);
  static GgufValue strings(std::vector<std::string> values);
  // An array of arrays (the spec allows nesting; ggml itself does not read it).
  static GgufValue arrays(std::vector<GgufValue> values);
  // An array of `count` fixed-size elements already packed little-endian in
  // `packed` (count * gguf_type_size(element_type) bytes). Used by the parser.
  static GgufValue packed(GgufType element_type, uint64_t count, std::string packed);

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::kArray; }

  // Scalars. Each throws zaya::Error if the value is not of a fitting type.
  // Any integer type whose value is >= 0.
  uint64_t as_uint() const;
  // Any integer type whose value fits in int64.
  int64_t as_int() const;
  // float32 or float64.
  double as_float() const;
  bool as_bool() const;
  const std::string& as_string() const;

  // Arrays.
  GgufType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  // Element i as a value of its own (copied).
  GgufValue element(uint64_t i) const;
  // Packed bytes of a fixed-size element array.
  std::span<const uint8_t> packed_bytes() const;
  // Elements of a string array / an array of arrays.
  const std::vector<std::string>& string_elements() const { return strings_; }
  const std::vector<GgufValue>& array_elements() const { return arrays_; }

  // "uint32 7", "string \"zaya\"", "array of 3 float32" (for messages; strings shortened).
  std::string describe() const;

  // Appends the value's encoding (without the leading type) to `out`.
  void encode(std::string& out) const;

  bool operator==(const GgufValue& other) const = default;

 private:
  static GgufValue scalar(GgufType type, uint64_t bits) {
    GgufValue v;
    v.type_ = type;
    v.bits_ = bits;
    return v;
  }
  void check_array(const char* what) const;

  GgufType type_ = GgufType::kU8;
  uint64_t bits_ = 0;                      // scalar payload: the value's little-endian bytes, zero-extended
  std::string string_;                     // kString
  GgufType element_type_ = GgufType::kU8;  // kArray: element type, count and elements
  uint64_t count_ = 0;
  std::string packed_;                // fixed-size elements
  std::vector<std::string> strings_;  // string elements
  std::vector<GgufValue> arrays_;     // nested arrays
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

// The key -> value pairs of one file, in file order. Lookups fail with a
// zaya::Error naming `label` (the file) and the key.
class GgufMetadata {
 public:
  explicit GgufMetadata(std::string label = "gguf") : label_(std::move(label)) {}

  // Fails if the key is already present.
  void add(std::string key, GgufValue value);

  const std::vector<GgufKeyValue>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  const std::string& label() const { return label_; }

  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Fails if the key is missing.
  const GgufValue& at(std::string_view key) const;

  // Typed lookups; each fails if the key is missing or its value has another type.
  uint64_t get_uint(std::string_view key) const;  // any integer type, value >= 0
  int64_t get_int(std::string_view key) const;    // any integer type, value fits int64
  uint32_t get_u32(std::string_view key) const;   // exactly uint32
  double get_float(std::string_view key) const;   // float32 or float64
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  // An array whose elements have `element_type`.
  const GgufValue& get_array(std::string_view key, GgufType element_type) const;

 private:
  [[noreturn]] void wrong_type(std::string_view key, const GgufValue& v, std::string_view expected) const;

  std::string label_;
  std::vector<GgufKeyValue> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// Implementation of GgufValue::numbers.
template <typename T>
GgufValue GgufValue::numbers(std::span<const T> values) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "use GgufValue::bools for bool arrays");
  GgufType type;
  if constexpr (std::is_same_v<T, uint8_t>)
    type = GgufType::kU8;
  else if constexpr (std::is_same_v<T, int8_t>)
    type = GgufType::kI8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    type = GgufType::kU16;
  else if constexpr (std::is_same_v<T, int16_t>)
    type = GgufType::kI16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    type = GgufType::kU32;
  else if constexpr (std::is_same_v<T, int32_t>)
    type = GgufType::kI32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    type = GgufType::kU64;
  else if constexpr (std::is_same_v<T, int64_t>)
    type = GgufType::kI64;
  else if constexpr (std::is_same_v<T, float>)
    type = GgufType::kF32;
  else {
    static_assert(std::is_same_v<T, double>, "unsupported element type");
    type = GgufType::kF64;
  }
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return packed(type, values.size(), std::move(bytes));
}

}  // namespace zaya
