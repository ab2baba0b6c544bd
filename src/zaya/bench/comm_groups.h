#pragma once
// The collective steps that set up a `zaya bench comm` run on every rank of
// the world: the groups the benchmark runs on (comm_split.h; every group must
// have as many ranks), the traffic matrix of all_to_all_v (read on rank 0
// only, so the file need exist only there), and the "Rank r Group g Pid p on
// host" lines nccl-tests prints. Every rank calls each of them, in the same
// order, and every rank gets the same result or the same error.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zaya/bench/comm_split.h"
#include "zaya/bench/traffic_matrix.h"
#include "zaya/dist/comm.h"

namespace zaya {

struct CommGroups {
  std::unique_ptr<Comm> split;  // this rank's group when the world is split, else null
  Comm* group = nullptr;        // the communicator the collectives run on: `split`, or the world
  int color = 0;                // this rank's group number
  int groups = 1;               // how many groups the world makes
};

// Splits the world by `spec` (`text` is the --split flag as given, for the
// error); fails on every rank when the groups differ in size.
CommGroups split_comm_groups(Comm& world, const SplitSpec& spec, const std::string& text);

// Where the all_to_all_v matrix comes from: a file (--matrix), or the routing
// loads of zaya train's metrics.jsonl for groups of `group_ranks` (--routing);
// neither: nullopt (a uniform matrix). `write_to`, when set, receives the matrix
// in read_traffic_matrix's format (rank 0 writes it).
struct CommMatrixSource {
  std::string matrix, routing;
  RoutingSelection selection;
  std::string write_to;
};
std::optional<TrafficMatrix> load_comm_matrix(Comm& world, int group_ranks, const CommMatrixSource& source);

// One line per world rank, gathered from every rank.
std::vector<std::string> comm_rank_lines(Comm& world, int color);

}  // namespace zaya
