#pragma once
// Verifiable data for `zaya bench comm` (the idea of nccl-tests' verifiable/):
// every input element is a small integer drawn from a hash of (seed, rank,
// index), chosen so that the exact result of the collective, and every
// partial result on the way there, is exactly representable in the data type.
// Any reduction order then gives a bit-exact answer, and a result that
// differs from the expected one by a single unit is a real error (#wrong).
//
// Per op, for n ranks and a type whose integers are exact up to L (bfloat16
// 256, half 2048, float 2^24, double 2^53, int32 2^31-1, int64 2^62, uint8 255):
//   sum   values in [-K, K] ([0, K] unsigned), K = L / c, from c = min(n, L)
//         contributing ranks per element (the others give 0), so |any partial sum| <= L
//   prod  +-1 everywhere except up to 6 ranks per element giving +-2: |product| <= 64
//   min, max, and the data of non-reducing collectives: values in [-min(L,1000), +...]
//   avg   (floating types) w + d_r with sum over ranks of d_r = 0, so the
//         average is exactly w; K = L / (3n)

#include <cstdint>

#include "zaya/dist/comm.h"

namespace zaya {

class VerifiableData {
 public:
  // reduces = false: data for a collective that only moves elements (op ignored).
  VerifiableData(DType dtype, ReduceOp op, bool reduces, int nranks, uint64_t seed);

  // Input element `index` of rank `rank`, as an exact integer.
  int64_t input(int rank, uint64_t index) const;
  // The exact result of reducing input(r, index) over all ranks.
  int64_t reduced(uint64_t index) const;

  // buf[i] = input(rank, first + i), i < count, in the data type.
  void fill_input(void* buf, int rank, uint64_t first, int64_t count) const;
  // buf[i] = reduced(first + i).
  void fill_reduced(void* buf, uint64_t first, int64_t count) const;

  DType dtype() const { return dtype_; }

 private:
  DType dtype_;
  ReduceOp op_;
  bool reduces_;
  int nranks_;
  uint64_t seed_;
  int64_t k_ = 1;            // value magnitude bound
  int contributors_ = 1;     // sum: ranks with non-zero values per element
  int doublings_ = 0;        // prod: ranks giving +-2 per element
  bool avg_spread_ = false;  // avg: per-rank zero-sum offsets in use
  bool is_unsigned_ = false;
};

// Largest integer magnitude up to which every integer is exact in the type.
int64_t exact_integer_limit(DType t);

// Stores / loads an exact integer as element i of a buffer of type t.
void store_integer(void* buf, int64_t i, int64_t v, DType t);
double load_as_double(const void* buf, int64_t i, DType t);

// Number of elements of `got` that differ from `want` (both `count` elements
// of type t; floating values compare by value).
int64_t count_mismatches(const void* got, const void* want, int64_t count, DType t);

}  // namespace zaya
