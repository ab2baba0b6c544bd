#include "zaya/infer/matrix_types.h"

#include <gtest/gtest.h>

namespace zaya {
namespace {

TEST(MatrixTypes, NamesAreTheWeightsDtypeTheCliPrints) {
  EXPECT_EQ((MatrixTypes{FloatMatrices::kF32, false, ""}).name(), "f32");
  EXPECT_EQ((MatrixTypes{FloatMatrices::kBF16, false, ""}).name(), "bf16");
  EXPECT_EQ((MatrixTypes{FloatMatrices::kMixed, false, ""}).name(), "mixed");
  EXPECT_EQ((MatrixTypes{FloatMatrices::kBF16, true, ""}).name(), "int8+bf16");
  EXPECT_EQ((MatrixTypes{FloatMatrices::kF32, true, ""}).name(), "int8+f32");
  EXPECT_EQ((MatrixTypes{FloatMatrices::kBF16, false, "mxfp4"}).name(), "mxfp4-experts+bf16");
  EXPECT_EQ((MatrixTypes{FloatMatrices::kBF16, true, "fp8"}).name(), "fp8-experts+int8+bf16");
}

// The KV cache follows the float matrices, not the name: the engine once tested matrix_dtype() != "f32", which gave
// an f32 model with int8 matrices ("int8+f32") a bf16 cache.
TEST(MatrixTypes, KvCacheIsBf16OnlyBesideBf16Matrices) {
  EXPECT_FALSE(kv_cache_bf16({FloatMatrices::kF32, false, ""}, true));
  EXPECT_FALSE(kv_cache_bf16({FloatMatrices::kF32, true, ""}, true));
  EXPECT_TRUE(kv_cache_bf16({FloatMatrices::kBF16, false, ""}, true));
  EXPECT_TRUE(kv_cache_bf16({FloatMatrices::kBF16, true, ""}, true));
  EXPECT_TRUE(kv_cache_bf16({FloatMatrices::kMixed, false, ""}, true));
  EXPECT_TRUE(kv_cache_bf16({FloatMatrices::kMixed, true, ""}, true));
  for (FloatMatrices f : {FloatMatrices::kF32, FloatMatrices::kBF16, FloatMatrices::kMixed})
    for (bool int8 : {false, true}) EXPECT_FALSE(kv_cache_bf16({f, int8, ""}, false));  // --exact: f32 pages
}

}  // namespace
}  // namespace zaya
