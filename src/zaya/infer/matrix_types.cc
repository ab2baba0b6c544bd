#include "zaya/infer/matrix_types.h"

#include "zaya/core/enum_names.h"

namespace zaya {
namespace {

constexpr EnumName<FloatMatrices> kFloatMatricesNames[] = {
    {FloatMatrices::kF32, "f32"}, {FloatMatrices::kBF16, "bf16"}, {FloatMatrices::kMixed, "mixed"}};

}  // namespace

std::string MatrixTypes::name() const {
  const std::string f = enum_name<FloatMatrices>(kFloatMatricesNames, floats);
  const std::string base = int8 ? "int8+" + f : f;
  return experts.empty() ? base : experts + "-experts+" + base;
}

bool kv_cache_bf16(const MatrixTypes& types, bool bf16_activations) {
  return bf16_activations && types.floats != FloatMatrices::kF32;
}

}  // namespace zaya
