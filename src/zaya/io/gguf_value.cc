#include "zaya/io/gguf_value.h"

#include <fmt/format.h>

#include <limits>

#include "zaya/core/error.h"
#include "zaya/io/utf8.h"

namespace zaya {
namespace {

// The signed value of a signed integer scalar's payload.
int64_t sign_extend(GgufType type, uint64_t bits) {
  switch (type) {
    case GgufType::kI8: return static_cast<int8_t>(static_cast<uint8_t>(bits));
    case GgufType::kI16: return static_cast<int16_t>(static_cast<uint16_t>(bits));
    case GgufType::kI32: return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case GgufType::kI64: return static_cast<int64_t>(bits);
    default: return 0;
  }
}

bool is_signed(GgufType type) {
  return type == GgufType::kI8 || type == GgufType::kI16 || type == GgufType::kI32 || type == GgufType::kI64;
}

void append_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void append_string(std::string& out, const std::string& s) {
  append_u64(out, s.size());
  out.append(s);
}

}  // namespace

GgufValue GgufValue::f32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return scalar(GgufType::kF32, bits);
}

GgufValue GgufValue::f64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return scalar(GgufType::kF64, bits);
}

GgufValue GgufValue::string(std::string v) {
  GgufValue out;
  out.type_ = GgufType::kString;
  out.string_ = std::move(v);
  return out;
}

GgufValue GgufValue::bools(const std::vector<bool>& values) {
  std::string bytes;
  bytes.reserve(values.size());
  for (bool b : values) bytes.push_back(b ? '\1' : '\0');
  return packed(GgufType::kBool, values.size(), std::move(bytes));
}

GgufValue GgufValue::strings(std::vector<std::string> values) {
  GgufValue out;
  out.type_ = GgufType::kArray;
  out.element_type_ = GgufType::kString;
  out.count_ = values.size();
  out.strings_ = std::move(values);
  return out;
}

GgufValue GgufValue::arrays(std::vector<GgufValue> values) {
  for (size_t i = 0; i < values.size(); ++i)
    ZAYA_CHECK(values[i].is_array(), "GGUF array of arrays: element {} is a {}, not an array", i,
               gguf_type_name(values[i].type()));
  GgufValue out;
  out.type_ = GgufType::kArray;
  out.element_type_ = GgufType::kArray;
  out.count_ = values.size();
  out.arrays_ = std::move(values);
  return out;
}

GgufValue GgufValue::packed(GgufType element_type, uint64_t count, std::string packed) {
  const size_t size = gguf_type_size(element_type);
  ZAYA_ASSERT(size > 0);
  ZAYA_ASSERT(packed.size() / size == count && packed.size() % size == 0);
  GgufValue out;
  out.type_ = GgufType::kArray;
  out.element_type_ = element_type;
  out.count_ = count;
  out.packed_ = std::move(packed);
  return out;
}

uint64_t GgufValue::as_uint() const {
  if (!gguf_type_is_integer(type_)) fail("GGUF value {} is not an integer", describe());
  if (is_signed(type_)) {
    const int64_t v = sign_extend(type_, bits_);
    if (v < 0) fail("GGUF value {} is negative, expected a non-negative integer", describe());
    return static_cast<uint64_t>(v);
  }
  return bits_;
}

int64_t GgufValue::as_int() const {
  if (!gguf_type_is_integer(type_)) fail("GGUF value {} is not an integer", describe());
  if (is_signed(type_)) return sign_extend(type_, bits_);
  if (bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("GGUF value {} does not fit in a signed 64-bit integer", describe());
  return static_cast<int64_t>(bits_);
}

double GgufValue::as_float() const {
  if (type_ == GgufType::kF32) {
    float f;
    const auto bits = static_cast<uint32_t>(bits_);
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  if (type_ == GgufType::kF64) {
    double d;
    std::memcpy(&d, &bits_, sizeof(d));
    return d;
  }
  fail("GGUF value {} is not a float32 or float64", describe());
}

bool GgufValue::as_bool() const {
  if (type_ != GgufType::kBool) fail("GGUF value {} is not a bool", describe());
  return bits_ != 0;
}

const std::string& GgufValue::as_string() const {
  if (type_ != GgufType::kString) fail("GGUF value {} is not a string", describe());
  return string_;
}

void GgufValue::check_array(const char* what) const {
  if (type_ != GgufType::kArray) fail("GGUF value {} is not an array ({})", describe(), what);
}

GgufValue GgufValue::element(uint64_t i) const {
  check_array("element");
  ZAYA_CHECK(i < count_, "GGUF array index {} is out of range: the array has {} elements", i, count_);
  if (element_type_ == GgufType::kString) return string(strings_[i]);
  if (element_type_ == GgufType::kArray) return arrays_[i];
  const size_t size = gguf_type_size(element_type_);
  uint64_t bits = 0;
  std::memcpy(&bits, packed_.data() + i * size, size);  // little-endian host: low bytes first
  return scalar(element_type_, bits);
}

std::span<const uint8_t> GgufValue::packed_bytes() const {
  check_array("packed bytes");
  return {reinterpret_cast<const uint8_t*>(packed_.data()), packed_.size()};
}

std::string GgufValue::describe() const {
  switch (type_) {
    case GgufType::kBool: return bits_ ? "bool true" : "bool false";
    case GgufType::kF32:
    case GgufType::kF64: return fmt::format("{} {}", gguf_type_name(type_), as_float());
    case GgufType::kString: return fmt::format("string \"{}\"", printable(string_, 60));
    case GgufType::kArray: return fmt::format("array of {} {}", count_, gguf_type_name(element_type_));
    default:
      if (is_signed(type_)) return fmt::format("{} {}", gguf_type_name(type_), sign_extend(type_, bits_));
      return fmt::format("{} {}", gguf_type_name(type_), bits_);
  }
}

void GgufValue::encode(std::string& out) const {
  switch (type_) {
    case GgufType::kString: append_string(out, string_); return;
    case GgufType::kArray:
      append_u32(out, static_cast<uint32_t>(element_type_));
      append_u64(out, count_);
      if (element_type_ == GgufType::kString) {
        for (const std::string& s : strings_) append_string(out, s);
      } else if (element_type_ == GgufType::kArray) {
        for (const GgufValue& a : arrays_) a.encode(out);
      } else {
        out.append(packed_);
      }
      return;
    default: {
      const size_t size = gguf_type_size(type_);
      for (size_t i = 0; i < size; ++i) out.push_back(static_cast<char>(bits_ >> (8 * i)));
      return;
    }
  }
}

void GgufMetadata::add(std::string key, GgufValue value) {
  auto [it, inserted] = index_.emplace(key, entries_.size());
  if (!inserted) fail("{}: metadata key '{}' appears twice", label_, printable(key));
  entries_.push_back({std::move(key), std::move(value)});
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].value;
}

const GgufValue& GgufMetadata::at(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail("{}: missing metadata key '{}'", label_, printable(key));
  return *v;
}

void GgufMetadata::wrong_type(std::string_view key, const GgufValue& v, std::string_view expected) const {
  fail("{}: metadata key '{}' is {}, expected {}", label_, printable(key), v.describe(), expected);
}

uint64_t GgufMetadata::get_uint(std::string_view key) const {
  const GgufValue& v = at(key);
  if (!gguf_type_is_integer(v.type()) || (is_signed(v.type()) && v.as_int() < 0))
    wrong_type(key, v, "a non-negative integer");
  return v.as_uint();
}

int64_t GgufMetadata::get_int(std::string_view key) const {
  const GgufValue& v = at(key);
  if (!gguf_type_is_integer(v.type()) || (v.type() == GgufType::kU64 && v.as_uint() > uint64_t(INT64_MAX)))
    wrong_type(key, v, "an integer that fits in int64");
  return v.as_int();
}

uint32_t GgufMetadata::get_u32(std::string_view key) const {
  const GgufValue& v = at(key);
  if (v.type() != GgufType::kU32) wrong_type(key, v, "a uint32");
  return static_cast<uint32_t>(v.as_uint());
}

double GgufMetadata::get_float(std::string_view key) const {
  const GgufValue& v = at(key);
  if (v.type() != GgufType::kF32 && v.type() != GgufType::kF64) wrong_type(key, v, "a float32 or float64");
  return v.as_float();
}

bool GgufMetadata::get_bool(std::string_view key) const {
  const GgufValue& v = at(key);
  if (v.type() != GgufType::kBool) wrong_type(key, v, "a bool");
  return v.as_bool();
}

const std::string& GgufMetadata::get_string(std::string_view key) const {
  const GgufValue& v = at(key);
  if (v.type() != GgufType::kString) wrong_type(key, v, "a string");
  return v.as_string();
}

const GgufValue& GgufMetadata::get_array(std::string_view key, GgufType element_type) const {
  const GgufValue& v = at(key);
  if (!v.is_array() || v.element_type() != element_type)
    wrong_type(key, v, fmt::format("an array of {}", gguf_type_name(element_type)));
  return v;
}

}  // namespace zaya
