#pragma once
// The driver of `zaya bench comm`: nccl-tests' measurement loop over the
// project's Comm layer (docs/prior-art.md §1.1), shared by every
// collective (comm_collectives.h holds the per-collective conventions).
//
// For each collective x data type x op:
//   warm-up    `warmup` operations at the largest and at the smallest size
//   per size, out-of-place then in-place (where the collective has the form):
//     one untimed operation, a barrier, then `iters` timed iterations of
//     `agg_iters` operations each. Successive operations rotate through the
//     buffers (which are sized for the largest message), as nccl-tests does,
//     so small messages are not served from a warm cache.
//     time   = elapsed / (iters * agg_iters), combined over all ranks of the
//              world by `average` (0 rank 0, 1 mean, 2 min, 3 max)
//     per-iteration statistics: the slowest rank's time of each iteration
//     verify `check` times (outside the timed region): fresh verifiable data
//              (comm_data.h) with a new seed, one operation, an exact
//              element-wise comparison; #wrong is summed over all ranks.
//
// all_to_all_v moves a traffic matrix (traffic_matrix.h) scaled so that the
// mean per-rank send volume is the message size; algbw counts the busiest
// rank's bytes (max of sent and received) and busbw only its bytes that cross
// to other ranks, which reduces to nccl-tests' all_to_all numbers for a uniform
// matrix and stays honest for imbalanced ones.
//
// Ranks may be split into groups (comm_split.h) that run concurrently; every
// figure is per group, and averaged over the world like the times.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zaya/bench/comm_collectives.h"
#include "zaya/bench/stats.h"
#include "zaya/bench/traffic_matrix.h"
#include "zaya/dist/comm.h"

namespace zaya {

// Deliberate faults, to prove that verification and timeouts catch them.
enum class CommFault {
  kNone,
  kDropRank,  // the last rank of each group contributes zeros instead of its data (a wrong reduction)
  kOffByOne,  // the last rank's result has one element off by one after every checked operation
  kStall,     // the last world rank sleeps `stall_seconds` before its first operation (a hang)
};
CommFault parse_comm_fault(const std::string& name);
const char* comm_fault_name(CommFault f);

struct CommBenchOptions {
  std::vector<Collective> collectives = {Collective::kAllReduce};
  uint64_t min_bytes = uint64_t(32) << 20;  // -b
  uint64_t max_bytes = uint64_t(32) << 20;  // -e
  uint64_t step_bytes = uint64_t(1) << 20;  // -i
  uint64_t step_factor = 1;                 // -f (used when > 1)
  int iters = 20;                           // -n
  int warmup = 5;                           // -w
  int agg_iters = 1;                        // -m
  int check = 1;                            // -c: verified operations per size (0: none)
  int average = 1;                          // -a
  // Statistic behind the time, algbw and busbw columns: "mean" (nccl-tests:
  // elapsed / operations, combined over ranks by `average`), or "median" /
  // "min" of the per-iteration times (each iteration's slowest rank), which
  // shrug off the scheduler stalls of a shared machine.
  std::string time_stat = "mean";
  int root = 0;  // -r
  std::vector<DType> dtypes = {DType::kF32};
  std::vector<ReduceOp> ops = {ReduceOp::kSum};
  double timeout = 0;                   // -T seconds (0: none)
  bool raw = false;                     // --raw: the group is a Comm::raw_view (the library's calls, no layer)
  std::optional<TrafficMatrix> matrix;  // all_to_all_v (default: uniform)
  CommFault fault = CommFault::kNone;
  double stall_seconds = 3600;
};

struct CommSample {
  bool ran = false;
  double time_us = 0;
  double algbw = 0, busbw = 0;  // GB/s
  int64_t wrong = -1;           // -1: not verified
  SampleStats iter_us;          // per timed iteration (slowest rank), microseconds per operation
};

struct CommRow {
  uint64_t size_bytes = 0;
  int64_t count = 0;
  CommSample out_of_place, in_place;
};

struct CommRun {
  Collective coll = Collective::kAllReduce;
  DType dtype = DType::kF32;
  bool has_op = false;
  ReduceOp op = ReduceOp::kSum;
  int root = -1;  // -1: no root
  int group_ranks = 1;
  std::string matrix_source;  // all_to_all_v
  double imbalance = 1;       // all_to_all_v: busiest rank / mean
  std::vector<CommRow> rows;
};

struct CommBenchSummary {
  double avg_busbw = 0;  // mean busbw over every measured sample (nccl-tests' "Avg bus bandwidth")
  int64_t samples = 0;
  int64_t wrong_total = 0;  // over every verified sample
  bool verified = false;    // at least one sample was verified
};
CommBenchSummary summarize_comm_runs(const std::vector<CommRun>& runs);

// True when `op` can be used with `t` for collective `c` (avg needs a floating type).
bool comm_combination_valid(Collective c, DType t, ReduceOp op);

class CommBench {
 public:
  // `group` is the communicator the collectives run on (the world, or this
  // rank's split group); `world` synchronises and combines the measurements.
  // The options' timeout applies to both communicators until destruction.
  CommBench(Comm& world, Comm& group, CommBenchOptions options);
  ~CommBench();
  CommBench(const CommBench&) = delete;
  CommBench& operator=(const CommBench&) = delete;

  using RowCallback = std::function<void(const CommRun& run, const CommRow& row)>;
  // One sweep over the sizes; every rank must call it with the same arguments.
  CommRun run(Collective c, DType t, ReduceOp op, const RowCallback& on_row = {});

  const CommBenchOptions& options() const { return options_; }

 private:
  struct Buffers;
  CommSample measure(const CommRun& run, Buffers& b, bool in_place);
  void issue(const CommRun& run, Buffers& b, bool in_place, size_t shift_bytes);
  int64_t verify(const CommRun& run, Buffers& b, bool in_place, uint64_t seed);
  double combine_over_world(double seconds);

  Comm& world_;
  Comm& group_;
  CommBenchOptions options_;
  double world_timeout_ = 0, group_timeout_ = 0;  // restored on destruction
  bool stalled_ = false;
  uint64_t rep_ = 0;
};

// The JSON document of `zaya bench comm --json` (format in docs/bench.md).
struct CommBenchContext {
  int world_ranks = 1, group_ranks = 1, groups = 1;
  std::string split;
  std::vector<std::string> rank_lines;  // "Rank 0 Group 0 Pid 123 on host"
  double min_bw = 0;                    // the gate (0: none)
};
nlohmann::json comm_bench_json(const CommBenchOptions& options, const CommBenchContext& context,
                               const std::vector<CommRun>& runs);

}  // namespace zaya
