#pragma once
// `zaya bench membw`: memory bandwidth from L1-resident working sets to DRAM,
// over thread counts, with the STREAM kernels (stream.h) and memcpy.
//
// The size axis is the working set: the bytes of every array a kernel touches
// (copy, scale, memcpy: 2 arrays; add, triad: 3), so that a cache's capacity
// reads straight off the plot. Bandwidth uses STREAM's byte counting (copy and
// scale 16 bytes per element, add and triad 24; memcpy 2 x its size) and the
// best repetition, as STREAM reports. Small working sets are swept many times
// per timed repetition (about `bytes_per_rep` of traffic).

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zaya {

struct MembwOptions {
  std::vector<std::string> kernels = {"copy", "scale", "add", "triad", "memcpy"};
  std::vector<int> threads;                 // empty: 1, 2, 4, ... and the maximum
  uint64_t min_bytes = uint64_t(16) << 10;  // working set
  uint64_t max_bytes = uint64_t(2) << 30;
  uint64_t step_factor = 2;
  int reps = 5;
  double bytes_per_rep = 256.0 * (1 << 20);  // traffic per timed repetition, at least one sweep
};

struct MembwPoint {
  std::string kernel;
  int threads = 0;
  uint64_t nominal = 0;      // the sweep's working-set size this point stands for
  uint64_t working_set = 0;  // bytes actually touched (whole elements per array)
  int64_t elements = 0;      // per array (8-byte doubles; bytes for memcpy)
  int passes = 1;
  double best_gbps = 0, mean_gbps = 0;
};

// The thread counts when none are given: 1, 2, 4, ... below the maximum, and the maximum.
std::vector<int> default_thread_counts(int max_threads);

// Measures every kernel x thread count x size; `on_point` sees each result.
std::vector<MembwPoint> run_membw(const MembwOptions& options,
                                  const std::function<void(const MembwPoint&)>& on_point = {});

// memcpy of `bytes` from one buffer to another by `threads` threads (each its
// own block), `reps` repetitions of `passes` copies; best and mean GB/s of
// 2 x bytes per copy.
MembwPoint run_memcpy(uint64_t bytes, int threads, int reps, int passes);

// The JSON document of `zaya bench membw --json` (format in docs/bench.md).
nlohmann::json membw_json(const MembwOptions& options, const std::vector<MembwPoint>& points);

}  // namespace zaya
