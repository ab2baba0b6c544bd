#pragma once
// `zaya bench membw` from its command-line options, and the table it prints:
// one column per kernel x thread count ("triad/4t"), one row per working set
// of the sweep.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/bench/membw_bench.h"

namespace zaya {

struct MembwJobOptions {
  std::vector<std::string> kernels = {"copy", "scale", "add", "triad", "memcpy"};
  std::vector<int> threads;                         // empty: default_thread_counts
  std::string min_bytes = "16K", max_bytes = "2G";  // byte_size.h's forms
  uint64_t factor = 2;
  int reps = 5;
};

// Sizes parsed (errors name --min-bytes / --max-bytes).
MembwOptions membw_options(const MembwJobOptions& options);

// The thread counts run_membw sweeps: the given ones, or the defaults up to `max_threads`.
std::vector<int> membw_thread_counts(const MembwOptions& options, int max_threads);

struct MembwTable {
  std::vector<std::string> columns;       // "kernel/Nt", kernels outermost
  std::vector<uint64_t> working_sets;     // per row: the nominal working set
  std::vector<std::vector<double>> gbps;  // [row][column]: best GB/s (0 where not measured)
};
// Points of every kernel x thread count, in sweep order, into the table; the
// i-th point of a column lands in row i (the exact bytes differ slightly per
// kernel, whole elements per array, so rows go by position, not by bytes).
MembwTable membw_table(const std::vector<MembwPoint>& points, const std::vector<std::string>& kernels,
                       const std::vector<int>& threads);

}  // namespace zaya
