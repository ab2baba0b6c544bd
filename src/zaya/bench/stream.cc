#include "zaya/bench/stream.h"

#include <omp.h>

#include <algorithm>

#include "zaya/core/huge_pages.h"
#include "zaya/core/timer.h"

namespace zaya {

const char* stream_kernel_name(StreamKernel k) {
  switch (k) {
    case StreamKernel::kCopy: return "copy";
    case StreamKernel::kScale: return "scale";
    case StreamKernel::kAdd: return "add";
    case StreamKernel::kTriad: return "triad";
  }
  return "?";
}

int stream_bytes_per_element(StreamKernel k) { return k == StreamKernel::kCopy || k == StreamKernel::kScale ? 16 : 24; }

StreamResult run_stream(StreamKernel kernel, int64_t n, int threads, int reps, int passes) {
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  passes = std::max(passes, 1);
  // In 2 MiB huge pages where the kernel gives them, as the decode weights are (core/huge_pages.h): over 4 KiB
  // pages the sweep also pays a TLB miss per page and measures less than the DRAM can give.
  const size_t array_bytes = size_t(n) * sizeof(double);
  HugePageRegion a(array_bytes), b(array_bytes), c(array_bytes);
  auto* A = reinterpret_cast<double*>(a.data());
  auto* B = reinterpret_cast<double*>(b.data());
  auto* C = reinterpret_cast<double*>(c.data());
  // First touch in parallel with the same static schedule as the kernels (NUMA placement).
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t i = 0; i < n; ++i) {
    A[i] = 1.0;
    B[i] = 2.0;
    C[i] = 0.0;
  }
  const double s = 3.0;
  // One parallel region per repetition; the same static schedule in every sweep
  // gives each thread the same block, so sweeps need no barrier between them.
  auto run_sweeps = [&](int sweeps) {
#pragma omp parallel num_threads(nt)
    for (int p = 0; p < sweeps; ++p) {
      switch (kernel) {
        case StreamKernel::kCopy:
#pragma omp for schedule(static) nowait
          for (int64_t i = 0; i < n; ++i) C[i] = A[i];
          break;
        case StreamKernel::kScale:
#pragma omp for schedule(static) nowait
          for (int64_t i = 0; i < n; ++i) B[i] = s * C[i];
          break;
        case StreamKernel::kAdd:
#pragma omp for schedule(static) nowait
          for (int64_t i = 0; i < n; ++i) C[i] = A[i] + B[i];
          break;
        case StreamKernel::kTriad:
#pragma omp for schedule(static) nowait
          for (int64_t i = 0; i < n; ++i) A[i] = B[i] + s * C[i];
          break;
      }
    }
  };
  run_sweeps(1);
  StreamResult r;
  r.kernel = kernel;
  r.elements = n;
  r.threads = nt;
  r.passes = passes;
  r.min_seconds = 1e30;
  double total = 0;
  const double bytes = double(stream_bytes_per_element(kernel)) * double(n) * double(passes);
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_seconds();
    run_sweeps(passes);
    const double dt = now_seconds() - t0;
    r.min_seconds = std::min(r.min_seconds, dt);
    total += dt;
  }
  r.best_gbps = bytes / r.min_seconds / 1e9;
  r.mean_gbps = bytes * double(reps) / total / 1e9;
  return r;
}

double measure_dram_bandwidth_gbps(int threads) {
  // 3 arrays of 20M doubles = 480 MB, far beyond any last-level cache here.
  return run_stream(StreamKernel::kTriad, int64_t(20) << 20, threads, 5).best_gbps;
}

double working_set_bandwidth_gbps(int64_t bytes) {
  if (bytes <= 0) return measure_dram_bandwidth_gbps(0);
  return run_stream(StreamKernel::kTriad, working_set_stream_elements(bytes), 0, 10).best_gbps;
}

int64_t working_set_stream_elements(int64_t bytes) { return std::max<int64_t>(int64_t(1) << 20, bytes / 24); }

}  // namespace zaya
