#include "zaya/ops/matmul_bf16.h"

#include <gtest/gtest.h>

namespace zaya {

// `auto` takes bf16 GEMMs only where they were measured faster than float32
// (docs/performance.md, "GEMM peak"): AMX anywhere, AVX512-BF16 on AMD only.
TEST(Bf16GemmRule, AutoPicksBf16OnlyWhereItOutrunsFloat32) {
  EXPECT_TRUE(bf16_gemm_outruns_f32(Bf16Isa::kAmx, false));
  EXPECT_TRUE(bf16_gemm_outruns_f32(Bf16Isa::kAmx, true));
  EXPECT_TRUE(bf16_gemm_outruns_f32(Bf16Isa::kAvx512Bf16, true));
  EXPECT_FALSE(bf16_gemm_outruns_f32(Bf16Isa::kAvx512Bf16, false));  // Intel without AMX: 0.5x
  EXPECT_FALSE(bf16_gemm_outruns_f32(Bf16Isa::kNone, false));
  EXPECT_FALSE(bf16_gemm_outruns_f32(Bf16Isa::kNone, true));
  // This CPU's answer never claims bf16 where oneDNN has no native bf16 GEMM.
  if (!bf16_gemm_is_native()) {
    EXPECT_FALSE(bf16_gemm_outruns_f32());
  }
}

}  // namespace zaya
