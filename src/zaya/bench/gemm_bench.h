#pragma once
// Timing GEMMs through ops/matmul (f32: oneDNN sgemm; bf16: oneDNN matmul,
// AMX where present) for `zaya bench gemm`, and the judgement of each shape:
// its share of the measured peak, whether it is compute- or memory-bound on
// the roofline, and whether it "falls off" (tile / wave quantization: a shape
// slower per FLOP than one it contains, or slower in total than its padded
// version). Background: docs/prior-art.md §5.1.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/bench/gemm_shapes.h"

namespace zaya {

enum class GemmDType { kF32, kBF16 };
const char* gemm_dtype_name(GemmDType t);  // "f32", "bf16"
GemmDType parse_gemm_dtype(const std::string& name);

struct GemmTimingOptions {
  double min_seconds = 0.1;  // keep calling until this much time has passed...
  int min_calls = 3;         // ...and at least this many calls (after one untimed call)
  int max_calls = 1000;
};

struct GemmTiming {
  GemmShape shape;
  GemmDType dtype = GemmDType::kF32;
  int calls = 0;
  double best_seconds = 0;  // fastest call
  double median_seconds = 0;
  double gflops = 0;  // from the fastest call
};

// Times one GEMM shape on freshly allocated, randomly filled operands.
GemmTiming time_gemm(GemmDType dtype, const GemmShape& shape, const GemmTimingOptions& options);

// Bytes of the operands and result: A and B in the data type, C in f32.
double gemm_bytes(GemmDType dtype, const GemmShape& shape);
// FLOPs per byte moved if every operand crossed memory once.
double arithmetic_intensity(GemmDType dtype, const GemmShape& shape);

// The peak to report against: the best of square GEMMs of side `side` (and
// of the sweep, by the caller). f32: 2048, bf16: 4096 by default.
double measure_gemm_peak_gflops(GemmDType dtype, int64_t side, const GemmTimingOptions& options);

// The shape with every dimension rounded up to a multiple of `align`.
GemmShape padded_shape(const GemmShape& s, int64_t align);

// One measured shape with its judgement.
struct GemmResult {
  GemmTiming timing;
  double efficiency = 0;      // gflops / peak
  double intensity = 0;       // FLOP / byte
  bool memory_bound = false;  // intensity below the machine balance peak / bandwidth
  bool falls_off = false;
  std::string falloff_reason;  // why, for the table
  bool has_padded = false;
  GemmTiming padded;  // timing of padded_shape, when measured
};

// Marks shapes slower per FLOP than `threshold` x the best shape of the same
// dtype and layout that fits inside them (every dimension <=), and shapes
// whose padded version takes less than `threshold` x their time... i.e. is
// clearly faster despite doing more work.
void mark_falloffs(std::vector<GemmResult>& results, double threshold);

}  // namespace zaya
