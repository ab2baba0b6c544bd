#pragma once
// The loop order every matvec kernel shares (ops/matvec.cc, ops/matvec_q8.cc):
// blocks of 8 weight rows outside, blocks of up to 4 tokens inside, so a block
// of rows stays in L1 while every token block passes over it (batched decode
// reads each weight from memory once). A kernel's tile code takes the token
// count as a compile-time constant, so its accumulators stay in registers.

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace zaya {

inline constexpr int64_t kMatvecRowBlock = 8;
inline constexpr int64_t kMatvecTokenBlock = 4;

// f(std::integral_constant<int, TT>{}, row_begin, row_end, first_token) for
// each block: rows [row_begin, row_end) of [r0, r1), TT (1-4) tokens from
// first_token.
template <typename F>
inline void for_matvec_blocks(int64_t r0, int64_t r1, int64_t tokens, F&& f) {
  for (int64_t rb = r0; rb < r1; rb += kMatvecRowBlock) {
    const int64_t re = std::min(r1, rb + kMatvecRowBlock);
    for (int64_t t = 0; t < tokens; t += kMatvecTokenBlock) {
      switch (std::min(kMatvecTokenBlock, tokens - t)) {
        case 1: f(std::integral_constant<int, 1>{}, rb, re, t); break;
        case 2: f(std::integral_constant<int, 2>{}, rb, re, t); break;
        case 3: f(std::integral_constant<int, 3>{}, rb, re, t); break;
        default: f(std::integral_constant<int, 4>{}, rb, re, t); break;
      }
    }
  }
}

}  // namespace zaya
