#include "zaya/bench/comm_data.h"

#include <algorithm>
#include <cstring>

#include "zaya/bench/comm_collectives.h"
#include "zaya/core/bf16.h"
#include "zaya/core/error.h"

namespace zaya {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash3(uint64_t seed, uint64_t a, uint64_t b) { return mix(mix(mix(seed) ^ a) ^ b); }

// Value in [-k, k], or [0, k] when unsigned.
int64_t bounded(uint64_t h, int64_t k, bool is_unsigned) {
  if (is_unsigned) return int64_t(h % uint64_t(k + 1));
  return int64_t(h % uint64_t(2 * k + 1)) - k;
}

}  // namespace

int64_t exact_integer_limit(DType t) {
  switch (t) {
    case DType::kBF16: return 256;
    case DType::kF16: return 2048;
    case DType::kF32: return int64_t(1) << 24;
    case DType::kF64: return int64_t(1) << 53;
    case DType::kI32: return 2147483647;
    case DType::kI64: return int64_t(1) << 62;
    case DType::kU8: return 255;
  }
  return 1;
}

VerifiableData::VerifiableData(DType dtype, ReduceOp op, bool reduces, int nranks, uint64_t seed)
    : dtype_(dtype), op_(op), reduces_(reduces), nranks_(nranks), seed_(seed) {
  ZAYA_ASSERT(nranks >= 1);
  is_unsigned_ = dtype == DType::kU8;
  const int64_t limit = exact_integer_limit(dtype), n = nranks;
  const int64_t spread_limit = std::min<int64_t>(limit, 1000);
  if (!reduces) {
    k_ = spread_limit;
    return;
  }
  switch (op) {
    case ReduceOp::kSum:
      contributors_ = int(std::min<int64_t>(n, limit));
      k_ = std::clamp<int64_t>(limit / contributors_, 1, int64_t(1) << 20);
      break;
    case ReduceOp::kProd:
      doublings_ = int(std::min<int64_t>(n, 6));
      k_ = 1;
      break;
    case ReduceOp::kMin:
    case ReduceOp::kMax: k_ = spread_limit; break;
    case ReduceOp::kAvg:
      ZAYA_CHECK(is_floating(dtype), "ReduceOp avg needs a floating-point type, got {}", dtype_name(dtype));
      if (3 * n <= limit) {
        avg_spread_ = true;
        k_ = std::clamp<int64_t>(limit / (3 * n), 1, int64_t(1) << 20);
      } else {
        k_ = n <= limit ? 1 : 0;  // degenerate but still exact: equal values (or zeros) on every rank
      }
      break;
  }
}

int64_t VerifiableData::input(int rank, uint64_t index) const {
  const uint64_t h = hash3(seed_, uint64_t(rank), index);
  if (!reduces_) return bounded(h, k_, is_unsigned_);
  switch (op_) {
    case ReduceOp::kSum: {
      const int64_t slot = (int64_t(rank) - int64_t(index % uint64_t(nranks_)) + nranks_) % nranks_;
      return slot < contributors_ ? bounded(h, k_, is_unsigned_) : 0;
    }
    case ReduceOp::kProd: {
      const int64_t slot = (int64_t(rank) - int64_t(index % uint64_t(nranks_)) + nranks_) % nranks_;
      const int64_t magnitude = slot < doublings_ && (h & 1u) ? 2 : 1;
      return !is_unsigned_ && (h & 2u) ? -magnitude : magnitude;
    }
    case ReduceOp::kMin:
    case ReduceOp::kMax: return bounded(h, k_, is_unsigned_);
    case ReduceOp::kAvg: {
      const int64_t w = k_ == 0 ? 0 : bounded(hash3(seed_, ~uint64_t(0), index), k_, false);
      if (!avg_spread_) return w;
      const int64_t d = bounded(hash3(seed_ ^ 0x5bd1e995u, ~uint64_t(0), index), k_, false);
      return w + (rank == 0 ? -int64_t(nranks_ - 1) * d : d);
    }
  }
  return 0;
}

int64_t VerifiableData::reduced(uint64_t index) const {
  if (reduces_ && op_ == ReduceOp::kAvg) return k_ == 0 ? 0 : bounded(hash3(seed_, ~uint64_t(0), index), k_, false);
  int64_t acc = input(0, index);
  for (int r = 1; r < nranks_; ++r) {
    const int64_t v = input(r, index);
    switch (op_) {
      case ReduceOp::kSum: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kAvg: break;
    }
  }
  return acc;
}

void VerifiableData::fill_input(void* buf, int rank, uint64_t first, int64_t count) const {
  for (int64_t i = 0; i < count; ++i) store_integer(buf, i, input(rank, first + uint64_t(i)), dtype_);
}

void VerifiableData::fill_reduced(void* buf, uint64_t first, int64_t count) const {
  for (int64_t i = 0; i < count; ++i) store_integer(buf, i, reduced(first + uint64_t(i)), dtype_);
}

void store_integer(void* buf, int64_t i, int64_t v, DType t) {
  switch (t) {
    case DType::kF32: static_cast<float*>(buf)[i] = float(v); break;
    case DType::kF64: static_cast<double*>(buf)[i] = double(v); break;
    case DType::kBF16: static_cast<uint16_t*>(buf)[i] = float_to_bf16(float(v)); break;
    case DType::kF16: static_cast<uint16_t*>(buf)[i] = float_to_f16(float(v)); break;  // |v| <= 2048: exact
    case DType::kI32: static_cast<int32_t*>(buf)[i] = int32_t(v); break;
    case DType::kI64: static_cast<int64_t*>(buf)[i] = v; break;
    case DType::kU8: static_cast<uint8_t*>(buf)[i] = uint8_t(v); break;
  }
}

double load_as_double(const void* buf, int64_t i, DType t) {
  switch (t) {
    case DType::kF32: return double(static_cast<const float*>(buf)[i]);
    case DType::kF64: return static_cast<const double*>(buf)[i];
    case DType::kBF16: return double(bf16_to_float(static_cast<const uint16_t*>(buf)[i]));
    case DType::kF16: return double(f16_to_float(static_cast<const uint16_t*>(buf)[i]));
    case DType::kI32: return double(static_cast<const int32_t*>(buf)[i]);
    case DType::kI64: return double(static_cast<const int64_t*>(buf)[i]);
    case DType::kU8: return double(static_cast<const uint8_t*>(buf)[i]);
  }
  return 0;
}

int64_t count_mismatches(const void* got, const void* want, int64_t count, DType t) {
  int64_t wrong = 0;
  switch (t) {
    case DType::kI64: {  // beyond double's exact range: compare as integers
      const int64_t *g = static_cast<const int64_t*>(got), *w = static_cast<const int64_t*>(want);
      for (int64_t i = 0; i < count; ++i) wrong += g[i] != w[i];
      return wrong;
    }
    case DType::kF32: {
      const float *g = static_cast<const float*>(got), *w = static_cast<const float*>(want);
      for (int64_t i = 0; i < count; ++i) wrong += !(g[i] == w[i]);
      return wrong;
    }
    default:
      for (int64_t i = 0; i < count; ++i) wrong += !(load_as_double(got, i, t) == load_as_double(want, i, t));
      return wrong;
  }
}

}  // namespace zaya
