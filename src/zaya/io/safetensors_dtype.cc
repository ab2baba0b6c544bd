#include "zaya/io/safetensors_dtype.h"

#include <array>

namespace zaya {
namespace {

struct DtypeRow {
  SafetensorsDtype dtype;
  std::string_view name;
  size_t size;
};

// Indexed by the enum value.
constexpr std::array<DtypeRow, 15> kDtypes = {{
    {SafetensorsDtype::kBool, "BOOL", 1},
    {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},
    {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},
    {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},
    {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},
    {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},
    {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
}};

constexpr bool rows_match_enum() {
  for (size_t i = 0; i < kDtypes.size(); ++i)
    if (static_cast<size_t>(kDtypes[i].dtype) != i) return false;
  return true;
}
static_assert(rows_match_enum(), "kDtypes must be indexed by SafetensorsDtype");

const DtypeRow& row(SafetensorsDtype dtype) { return kDtypes[static_cast<size_t>(dtype)]; }

}  // namespace

std::string_view dtype_name(SafetensorsDtype dtype) { return row(dtype).name; }

size_t dtype_size(SafetensorsDtype dtype) { return row(dtype).size; }

std::optional<SafetensorsDtype> parse_dtype(std::string_view name) {
  for (const DtypeRow& r : kDtypes)
    if (r.name == name) return r.dtype;
  return std::nullopt;
}

std::string known_dtype_names() {
  std::string out;
  for (const DtypeRow& r : kDtypes) {
    if (!out.empty()) out += ", ";
    out += r.name;
  }
  return out;
}

}  // namespace zaya
