#include "zaya/ops/precision.h"

#include "zaya/core/error.h"

namespace zaya {

const uint16_t* Bf16Context::required_copy_of(const float* w) const {
  const uint16_t* copy = copy_of(w);
  ZAYA_CHECK(copy != nullptr, "internal error: an input kept in bf16 needs its weight's bf16 copy (bf16 GEMMs)");
  return copy;
}

}  // namespace zaya
