#pragma once
// One aligned block of floats, carved into named tensors once, as llm.c does:
// one arena for parameters, one for gradients, one for activations. Nothing is
// allocated inside the step loop; the arena is sized up front and reused.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "zaya/core/error.h"

namespace zaya {

inline constexpr size_t kAlignBytes = 64;
inline constexpr size_t kAlignFloats = kAlignBytes / sizeof(float);

// Rounds a float count up so that every carved tensor starts on a cache line.
inline size_t align_floats(size_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

template <typename T>
struct AlignedFree {
  void operator()(T* p) const { std::free(p); }
};

template <typename T>
using AlignedPtr = std::unique_ptr<T[], AlignedFree<T>>;

template <typename T>
AlignedPtr<T> aligned_alloc_array(size_t count) {
  size_t bytes = (count * sizeof(T) + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  if (bytes == 0) bytes = kAlignBytes;
  void* p = std::aligned_alloc(kAlignBytes, bytes);
  if (p == nullptr) fail("out of memory allocating {} bytes", bytes);
  return AlignedPtr<T>(static_cast<T*>(p));
}

// A grow-only aligned buffer for scratch outside the arenas (the bf16 GEMMs'
// operands): get(n) reallocates only when n exceeds what it holds, so sizing
// it before the step loop (the ops' reserve_* functions) keeps the loop
// allocation-free.
template <typename T>
struct GrowBuffer {
  AlignedPtr<T> data;
  int64_t capacity = 0;
  T* get(int64_t n) {
    if (n > capacity) {
      data = aligned_alloc_array<T>(size_t(n));
      capacity = n;
    }
    return data.get();
  }
};

// A fixed-size float arena. `carve` hands out consecutive aligned slices. The
// same carving code runs twice: first on Arena::measuring(), whose carve only
// counts (and returns null), then on an arena of exactly that size, so the
// memory is allocated once and the layout is written down in one place.
class Arena {
 public:
  Arena() = default;
  explicit Arena(size_t floats) { reset(floats); }
  static Arena measuring() {
    Arena a;
    a.measuring_ = true;
    return a;
  }

  void reset(size_t floats) {
    data_ = aligned_alloc_array<float>(floats);
    capacity_ = floats;
    used_ = 0;
  }
  void zero() { std::memset(data_.get(), 0, capacity_ * sizeof(float)); }

  float* carve(size_t n) {
    size_t need = align_floats(n);
    if (measuring_) {
      used_ += need;
      return nullptr;
    }
    ZAYA_ASSERT(used_ + need <= capacity_);
    float* p = data_.get() + used_;
    used_ += need;
    return p;
  }

  // n bf16 values (two to a float slot, the same alignment).
  uint16_t* carve_bf16(size_t n) { return reinterpret_cast<uint16_t*>(carve((n + 1) / 2)); }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }

 private:
  AlignedPtr<float> data_;
  size_t capacity_ = 0;
  size_t used_ = 0;
  bool measuring_ = false;
};

}  // namespace zaya
