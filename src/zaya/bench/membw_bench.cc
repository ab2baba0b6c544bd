#include "zaya/bench/membw_bench.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zaya/bench/machine_info.h"
#include "zaya/bench/stream.h"
#include "zaya/core/arena.h"
#include "zaya/core/error.h"
#include "zaya/core/timer.h"

namespace zaya {

std::vector<int> default_thread_counts(int max_threads) {
  std::vector<int> out;
  for (int t = 1; t < max_threads; t *= 2) out.push_back(t);
  out.push_back(std::max(1, max_threads));
  return out;
}

MembwPoint run_memcpy(uint64_t bytes, int threads, int reps, int passes) {
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  auto src = aligned_alloc_array<uint8_t>(bytes), dst = aligned_alloc_array<uint8_t>(bytes);
  uint8_t* s = src.get();
  uint8_t* d = dst.get();
  // Each thread copies its own cache-line-aligned block, touched first by it.
  auto block = [&](int t, size_t& begin, size_t& len) {
    const size_t lines = (bytes + 63) / 64, per = (lines + size_t(nt) - 1) / size_t(nt);
    begin = std::min(bytes, uint64_t(size_t(t) * per * 64));
    len = std::min<size_t>(bytes - begin, per * 64);
  };
#pragma omp parallel num_threads(nt)
  {
    size_t b = 0, l = 0;
    block(omp_get_thread_num(), b, l);
    std::memset(s + b, 1, l);
    std::memset(d + b, 0, l);
  }
  auto run = [&](int sweeps) {
#pragma omp parallel num_threads(nt)
    {
      size_t b = 0, l = 0;
      block(omp_get_thread_num(), b, l);
      for (int p = 0; p < sweeps; ++p) {
        std::memcpy(d + b, s + b, l);
        // Keep the copies from being merged: the compiler cannot see through this.
        asm volatile("" : : "r"(d) : "memory");
      }
    }
  };
  run(1);
  MembwPoint r;
  r.kernel = "memcpy";
  r.threads = nt;
  r.working_set = 2 * bytes;
  r.elements = int64_t(bytes);
  r.passes = passes;
  double best = 1e30, total = 0;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_seconds();
    run(passes);
    const double dt = now_seconds() - t0;
    best = std::min(best, dt);
    total += dt;
  }
  const double moved = 2.0 * double(bytes) * double(passes);
  r.best_gbps = moved / best / 1e9;
  r.mean_gbps = moved * double(reps) / total / 1e9;
  return r;
}

std::vector<MembwPoint> run_membw(const MembwOptions& o, const std::function<void(const MembwPoint&)>& on_point) {
  ZAYA_CHECK(o.min_bytes >= 64 && o.min_bytes <= o.max_bytes,
             "working sets must satisfy 64 <= --min-bytes ({}) <= --max-bytes ({})", o.min_bytes, o.max_bytes);
  ZAYA_CHECK_USAGE(o.step_factor >= 2, "--factor must be at least 2, got {}", o.step_factor);
  ZAYA_CHECK_USAGE(o.reps >= 1, "--reps must be at least 1, got {}", o.reps);
  const std::vector<int> threads = o.threads.empty() ? default_thread_counts(omp_get_max_threads()) : o.threads;
  std::vector<MembwPoint> out;
  for (const std::string& k : o.kernels) {
    StreamKernel kernel = StreamKernel::kCopy;
    int arrays = 2;
    if (k == "copy")
      kernel = StreamKernel::kCopy;
    else if (k == "scale")
      kernel = StreamKernel::kScale;
    else if (k == "add")
      kernel = StreamKernel::kAdd, arrays = 3;
    else if (k == "triad")
      kernel = StreamKernel::kTriad, arrays = 3;
    else
      ZAYA_CHECK(k == "memcpy", "unknown kernel '{}'; allowed: copy, scale, add, triad, memcpy", k);
    for (int t : threads) {
      ZAYA_CHECK(t >= 1, "thread counts must be positive, got {}", t);
      for (uint64_t ws = o.min_bytes; ws <= o.max_bytes; ws *= o.step_factor) {
        const int passes = int(std::clamp(std::ceil(o.bytes_per_rep / double(ws)), 1.0, 1e7));
        MembwPoint p;
        if (k == "memcpy") {
          p = run_memcpy(ws / 2, t, o.reps, passes);
        } else {
          const int64_t n = int64_t(ws / (uint64_t(arrays) * 8));
          const StreamResult r = run_stream(kernel, std::max<int64_t>(n, 1), t, o.reps, passes);
          p.kernel = k;
          p.threads = t;
          p.elements = r.elements;
          p.working_set = uint64_t(r.elements) * uint64_t(arrays) * 8;
          p.passes = passes;
          p.best_gbps = r.best_gbps;
          p.mean_gbps = r.mean_gbps;
        }
        p.nominal = ws;
        out.push_back(p);
        if (on_point) on_point(p);
        if (ws > o.max_bytes / o.step_factor) break;
      }
    }
  }
  return out;
}

nlohmann::json membw_json(const MembwOptions& o, const std::vector<MembwPoint>& points) {
  nlohmann::json jp = nlohmann::json::array();
  for (const MembwPoint& p : points)
    jp.push_back({{"kernel", p.kernel},
                  {"threads", p.threads},
                  {"nominal", p.nominal},
                  {"working_set", p.working_set},
                  {"elements", p.elements},
                  {"passes", p.passes},
                  {"best_gbps", p.best_gbps},
                  {"mean_gbps", p.mean_gbps}});
  return {{"bench", "membw"},
          {"format_version", 1},
          {"machine", machine_json(machine_info())},
          {"config",
           {{"kernels", o.kernels},
            {"min_bytes", o.min_bytes},
            {"max_bytes", o.max_bytes},
            {"step_factor", o.step_factor},
            {"reps", o.reps},
            {"bytes_per_rep", o.bytes_per_rep}}},
          {"points", jp}};
}

}  // namespace zaya
