#include "zaya/bench/gemm_bench.h"

#include <algorithm>

#include "zaya/core/arena.h"
#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {

const char* gemm_dtype_name(GemmDType t) { return t == GemmDType::kF32 ? "f32" : "bf16"; }

GemmDType parse_gemm_dtype(const std::string& name) {
  if (name == "f32" || name == "float" || name == "float32") return GemmDType::kF32;
  if (name == "bf16" || name == "bfloat16") return GemmDType::kBF16;
  fail("unknown GEMM data type '{}'; allowed: f32, bf16", name);
}

double gemm_bytes(GemmDType dtype, const GemmShape& s) {
  const double e = dtype == GemmDType::kF32 ? 4 : 2;
  return e * (double(s.m) * double(s.k) + double(s.k) * double(s.n)) + 4.0 * double(s.m) * double(s.n);
}

double arithmetic_intensity(GemmDType dtype, const GemmShape& s) { return s.flops() / gemm_bytes(dtype, s); }

GemmTiming time_gemm(GemmDType dtype, const GemmShape& s, const GemmTimingOptions& o) {
  ZAYA_CHECK(s.m >= 1 && s.n >= 1 && s.k >= 1, "GEMM dimensions must be positive: {}x{}x{}", s.m, s.n, s.k);
  const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n, ldc = s.n;
  const size_t a_n = size_t(s.m * s.k), b_n = size_t(s.k * s.n), c_n = size_t(s.m * s.n);
  auto a = aligned_alloc_array<float>(a_n), b = aligned_alloc_array<float>(b_n), c = aligned_alloc_array<float>(c_n);
  fill_normal(a.get(), a_n, 0.0f, 1.0f, 7, 1);
  fill_normal(b.get(), b_n, 0.0f, 1.0f, 7, 2);
  std::fill(c.get(), c.get() + c_n, 0.0f);
  AlignedPtr<uint16_t> a16, b16;
  if (dtype == GemmDType::kBF16) {
    a16 = aligned_alloc_array<uint16_t>(a_n);
    b16 = aligned_alloc_array<uint16_t>(b_n);
    convert_to_bf16(a16.get(), a.get(), int64_t(a_n));
    convert_to_bf16(b16.get(), b.get(), int64_t(b_n));
  }
  Bf16GemmCache gemms;
  auto call = [&] {
    if (dtype == GemmDType::kF32)
      gemm<float>(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.get(), lda, b.get(), ldb, 0.0f, c.get(), ldc);
    else
      gemm_bf16(gemms, s.trans_a, s.trans_b, s.m, s.n, s.k, a16.get(), lda, b16.get(), ldb, c.get(), ldc);
  };
  call();  // untimed: page faults, primitive creation, caches
  std::vector<double> times;
  const double start = now_seconds();
  while (int(times.size()) < o.max_calls &&
         (int(times.size()) < o.min_calls || now_seconds() - start < o.min_seconds)) {
    const double t0 = now_seconds();
    call();
    times.push_back(now_seconds() - t0);
  }
  GemmTiming t;
  t.shape = s;
  t.dtype = dtype;
  t.calls = int(times.size());
  std::sort(times.begin(), times.end());
  t.best_seconds = times.front();
  t.median_seconds = times[times.size() / 2];
  t.gflops = t.best_seconds > 0 ? s.flops() / t.best_seconds / 1e9 : 0;  // 0: below the clock's resolution
  return t;
}

double measure_gemm_peak_gflops(GemmDType dtype, int64_t side, const GemmTimingOptions& o) {
  return time_gemm(dtype, {side, side, side, false, false}, o).gflops;
}

GemmShape padded_shape(const GemmShape& s, int64_t align) {
  auto up = [&](int64_t v) { return (v + align - 1) / align * align; };
  GemmShape p = s;
  p.m = up(s.m);
  p.n = up(s.n);
  p.k = up(s.k);
  return p;
}

void mark_falloffs(std::vector<GemmResult>& results, double threshold) {
  for (GemmResult& r : results) {
    const GemmShape& s = r.timing.shape;
    // A contained shape of the same kind that runs clearly faster per FLOP.
    const GemmResult* best = nullptr;
    for (const GemmResult& q : results) {
      const GemmShape& t = q.timing.shape;
      if (&q == &r || q.timing.dtype != r.timing.dtype || t.trans_a != s.trans_a || t.trans_b != s.trans_b) continue;
      if (t.m > s.m || t.n > s.n || t.k > s.k || t == s) continue;
      if (best == nullptr || q.timing.gflops > best->timing.gflops) best = &q;
    }
    if (best != nullptr && r.timing.gflops < threshold * best->timing.gflops) {
      r.falls_off = true;
      const GemmShape& t = best->timing.shape;
      r.falloff_reason = fmt::format("{:.0f}% of the GFLOP/s of the smaller {}x{}x{}",
                                     100 * r.timing.gflops / best->timing.gflops, t.m, t.n, t.k);
    }
    if (r.has_padded && r.padded.best_seconds < threshold * r.timing.best_seconds) {
      r.falls_off = true;
      const GemmShape& p = r.padded.shape;
      r.falloff_reason = fmt::format("padding to {}x{}x{} is {:.0f}% faster", p.m, p.n, p.k,
                                     100 * (r.timing.best_seconds / r.padded.best_seconds - 1));
    }
  }
}

}  // namespace zaya
