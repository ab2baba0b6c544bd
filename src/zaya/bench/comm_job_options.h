#pragma once
// The options of `zaya bench comm` as the command line gives them (names and
// sizes as text), resolved into the driver's options (comm_bench.h), and the
// (collective, data type, op) combinations a run measures, every one
// validated before anything is measured. Errors name the flag.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/bench/comm_bench.h"
#include "zaya/bench/comm_split.h"

namespace zaya {

struct CommJobOptions {
  std::vector<std::string> collectives = {"all_reduce"};  // names, or "all"
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  uint64_t step_factor = 1;
  int iters = 20, warmup = 5, agg_iters = 1, check = 1, average = 1, root = 0;
  int cycles = 1;                                              // -N: sweeps over everything (0: forever)
  std::vector<std::string> dtypes = {"float"}, ops = {"sum"};  // names, or "all"
  double timeout = 0, min_bw = 0, stall_seconds = 3600;
  std::string split;                                                  // --split: NCCL_TESTS_SPLIT's syntax
  std::string matrix, routing, routing_layer = "mean", write_matrix;  // all_to_all_v's traffic matrix
  int64_t routing_step = -1;
  std::string fault = "none", time_stat = "mean";
  bool raw = false;  // --raw: time the MPI library's calls directly (Comm::raw_view)
};

struct CommJobSettings {
  CommBenchOptions bench;  // everything but the traffic matrix (comm_groups.h loads it)
  bool all_ops = false;    // -o all: an op a data type cannot take is skipped, not an error
  SplitSpec split;
};

// Names to collectives, data types, ops and the fault, sizes to bytes, in the
// order the flags are checked; throws zaya::Error naming the flag.
CommJobSettings resolve_comm_job_options(const CommJobOptions& options);

struct CommCombo {
  Collective coll = Collective::kAllReduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;  // kSum for the collectives that do not reduce
};

// Every collective x data type (x op, for the reducing collectives), in that
// order. -o avg with an integer type fails unless `all_ops` (then it is
// skipped); send_recv on groups of one rank fails when it is the only
// collective asked for, and is dropped otherwise.
std::vector<CommCombo> comm_combos(const CommBenchOptions& options, bool all_ops, int group_ranks);

}  // namespace zaya
