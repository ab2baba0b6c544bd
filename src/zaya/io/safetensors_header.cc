#include "zaya/io/safetensors_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"
#include "zaya/io/utf8.h"

namespace zaya {
namespace {

// ordered_json keeps the header's key order, which is the "file order" of names().
using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr std::string_view kMetadataKey = "__metadata__";

std::string printable_json(const Json& value) { return printable(json_preview(value)); }

// The schema nests at most three levels: root object -> tensor entry object ->
// shape / data_offsets array of numbers. Deeper nesting is rejected as soon as
// it opens, so a hostile "[[[[..." costs nothing. Duplicate keys are rejected
// too: the JSON parser would silently keep only the last one, and a tensor
// named twice is exactly the kind of ambiguity an attacker would use.
class HeaderGuard {
 public:
  explicit HeaderGuard(std::string_view label) : label_(label) {}

  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth == 0 && event == Json::parse_event_t::array_start)
          fail("{}: header is a JSON array, expected an object", label_);
        if (depth >= 3)
          fail("{}: tensor '{}': header nests deeper than the safetensors schema allows", label_, printable(root_key_));
        if (event == Json::parse_event_t::object_start) keys_.emplace_back();
        break;
      case Json::parse_event_t::object_end: keys_.pop_back(); break;
      case Json::parse_event_t::key: on_key(depth, parsed.get_ref<const std::string&>()); break;
      default: break;
    }
    return true;
  }

 private:
  void on_key(int depth, const std::string& key) {
    if (!keys_.back().insert(key).second) {
      if (depth == 1 && key == kMetadataKey) fail("{}: __metadata__ appears twice in the header", label_);
      if (depth == 1) fail("{}: tensor '{}' appears twice in the header", label_, printable(key));
      if (root_key_ == kMetadataKey) fail("{}: __metadata__ key '{}' appears twice", label_, printable(key));
      fail("{}: tensor '{}': field '{}' appears twice", label_, printable(root_key_), printable(key));
    }
    if (depth == 1) root_key_ = key;
  }

  std::string_view label_;
  std::vector<std::unordered_set<std::string>> keys_;  // keys seen in each object still open
  std::string root_key_;                               // the tensor (or __metadata__) being parsed
};

class EntryParser {
 public:
  EntryParser(std::string_view label, const std::string& name, uint64_t data_size)
      : label_(label), name_(name), data_size_(data_size) {}

  SafetensorsTensorInfo parse(const Json& entry) const {
    if (!entry.is_object())
      fail("{}: tensor '{}': entry is a JSON {}, expected an object with dtype, shape and data_offsets", label_,
           printable(name_), entry.type_name());
    for (auto it = entry.begin(); it != entry.end(); ++it)
      if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
        fail("{}: tensor '{}': unknown field '{}' (expected dtype, shape, data_offsets)", label_, printable(name_),
             printable(it.key()));

    SafetensorsTensorInfo info;
    info.name = name_;
    info.dtype = parse_dtype_field(field(entry, "dtype"));
    info.shape = parse_shape(field(entry, "shape"));
    info.numel = count_elements(info.shape);
    parse_offsets(field(entry, "data_offsets"), info);
    return info;
  }

 private:
  const Json& field(const Json& entry, const char* key) const {
    auto it = entry.find(key);
    if (it == entry.end()) fail("{}: tensor '{}': missing field '{}'", label_, printable(name_), key);
    return *it;
  }

  SafetensorsDtype parse_dtype_field(const Json& value) const {
    if (!value.is_string())
      fail("{}: tensor '{}': field 'dtype' is a JSON {}, expected a string", label_, printable(name_),
           value.type_name());
    const auto& text = value.get_ref<const std::string&>();
    auto dtype = parse_dtype(text);
    if (!dtype)
      fail("{}: tensor '{}': unknown dtype '{}' (known: {})", label_, printable(name_), printable(text),
           known_dtype_names());
    return *dtype;
  }

  // A JSON number that must be a non-negative integer no larger than `limit`.
  uint64_t parse_count(const Json& value, const std::string& what, uint64_t limit) const {
    if (value.is_number_unsigned()) {
      uint64_t v = value.get<uint64_t>();
      if (v > limit) fail("{}: tensor '{}': {} is {}, larger than {}", label_, printable(name_), what, v, limit);
      return v;
    }
    if (value.is_number_integer())
      fail("{}: tensor '{}': {} is {}, expected a non-negative integer", label_, printable(name_), what,
           value.get<int64_t>());
    fail("{}: tensor '{}': {} is {}, expected a non-negative integer", label_, printable(name_), what,
         printable_json(value));
  }

  std::vector<int64_t> parse_shape(const Json& value) const {
    if (!value.is_array())
      fail("{}: tensor '{}': field 'shape' is a JSON {}, expected an array of non-negative integers", label_,
           printable(name_), value.type_name());
    std::vector<int64_t> shape;
    shape.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i)
      shape.push_back(static_cast<int64_t>(parse_count(value[i], fmt::format("shape[{}]", i), kMaxInt64)));
    return shape;
  }

  int64_t count_elements(const std::vector<int64_t>& shape) const {
    uint64_t numel = 1;
    for (int64_t dim : shape)
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel) || numel > kMaxInt64)
        fail("{}: tensor '{}': shape {} has more than 2^63-1 elements", label_, printable(name_), format_shape(shape));
    return static_cast<int64_t>(numel);
  }

  void parse_offsets(const Json& value, SafetensorsTensorInfo& info) const {
    if (!value.is_array() || value.size() != 2)
      fail("{}: tensor '{}': field 'data_offsets' is {}, expected [begin, end]", label_, printable(name_),
           printable_json(value));
    uint64_t limit = std::numeric_limits<uint64_t>::max();
    uint64_t begin = parse_count(value[0], "data_offsets[0]", limit);
    uint64_t end = parse_count(value[1], "data_offsets[1]", limit);
    if (begin > end)
      fail("{}: tensor '{}': data_offsets [{}, {}] has begin > end", label_, printable(name_), begin, end);
    if (end > data_size_)
      fail("{}: tensor '{}': data_offsets [{}, {}] run past the end of the data buffer ({} bytes)", label_,
           printable(name_), begin, end, data_size_);
    uint64_t need = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(info.numel), dtype_size(info.dtype), &need))
      fail("{}: tensor '{}': data_offsets [{}, {}] span {} bytes, but shape {} of {} needs more than 2^64", label_,
           printable(name_), begin, end, end - begin, format_shape(info.shape), dtype_name(info.dtype));
    if (end - begin != need)
      fail("{}: tensor '{}': data_offsets [{}, {}] span {} bytes, but shape {} of {} needs {}", label_,
           printable(name_), begin, end, end - begin, format_shape(info.shape), dtype_name(info.dtype), need);
    info.begin = begin;
    info.end = end;
  }

  std::string_view label_;
  const std::string& name_;
  uint64_t data_size_;
};

std::map<std::string, std::string> parse_metadata(std::string_view label, const Json& value) {
  if (!value.is_object())
    fail("{}: __metadata__ is a JSON {}, expected an object of strings", label, value.type_name());
  std::map<std::string, std::string> metadata;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it.value().is_string())
      fail("{}: __metadata__ value for key '{}' is a JSON {}, expected a string", label, printable(it.key()),
           it.value().type_name());
    metadata.emplace(it.key(), it.value().get<std::string>());
  }
  return metadata;
}

// Two tensors overlap when they share a byte; empty tensors share none. After
// sorting by begin, any overlap shows up between neighbours.
void check_overlaps(std::string_view label, const std::vector<SafetensorsTensorInfo>& tensors) {
  std::vector<const SafetensorsTensorInfo*> sorted;
  for (const auto& t : tensors)
    if (t.nbytes() > 0) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const auto& a = *sorted[i - 1];
    const auto& b = *sorted[i];
    if (a.end > b.begin)
      fail("{}: tensors '{}' (data_offsets [{}, {}]) and '{}' (data_offsets [{}, {}]) overlap", label,
           printable(a.name), a.begin, a.end, printable(b.name), b.begin, b.end);
  }
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string format_shape(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

SafetensorsLayout parse_safetensors_layout(std::string_view label, std::span<const uint8_t> file) {
  if (file.size() < 8)
    fail("{}: file is {} bytes, too short to hold the 8-byte header length (not a safetensors file?)", label,
         file.size());
  uint64_t header_len = read_u64_le(file.data());
  if (header_len > kMaxSafetensorsHeaderBytes)
    fail("{}: header length {} exceeds the {} byte limit (corrupt, or not a safetensors file)", label, header_len,
         kMaxSafetensorsHeaderBytes);
  if (header_len > file.size() - 8)
    fail("{}: header length {} runs past the end of the file ({} bytes)", label, header_len, file.size());

  SafetensorsLayout layout;
  layout.data_start = 8 + header_len;
  layout.data_size = file.size() - layout.data_start;

  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  Json root;
  try {
    HeaderGuard guard(label);
    root = Json::parse(text, text + header_len, std::ref(guard));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: header: invalid JSON: {}", label, printable(json_error_text(e)));
  }
  if (!root.is_object()) fail("{}: header is a JSON {}, expected an object", label, root.type_name());

  layout.tensors.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == kMetadataKey)
      layout.metadata = parse_metadata(label, it.value());
    else
      layout.tensors.push_back(EntryParser(label, it.key(), layout.data_size).parse(it.value()));
  }
  check_overlaps(label, layout.tensors);
  return layout;
}

}  // namespace zaya
