#include "zaya/bench/comm_groups.h"

#include <fmt/format.h>
#include <unistd.h>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"

namespace zaya {

CommGroups split_comm_groups(Comm& world, const SplitSpec& spec, const std::string& text) {
  CommGroups g;
  g.color = split_color(spec, world.rank());
  g.group = &world;
  if (spec.op != SplitSpec::Op::kNone) {
    g.split = world.split(g.color, world.rank(), "bench-group");
    g.group = g.split.get();
  }
  // Group leaders count the groups; the largest size and the negated smallest
  // come from one max-reduction.
  int64_t leader = g.group->rank() == 0, groups = 0, sizes[2] = {g.group->size(), -g.group->size()}, extremes[2];
  world.all_reduce(&leader, &groups, 1, DType::kI64, ReduceOp::kSum);
  world.all_reduce(sizes, extremes, 2, DType::kI64, ReduceOp::kMax);
  ZAYA_CHECK(extremes[0] == -extremes[1],
             "--split '{}' makes groups of different sizes ({} to {} ranks); use a "
             "split that divides the ranks evenly",
             text, -extremes[1], extremes[0]);
  g.groups = int(groups);
  return g;
}

// Rank 0 reads (or derives) the matrix and sends its text, or its error, to
// every rank: an error then reaches all ranks alike.
std::optional<TrafficMatrix> load_comm_matrix(Comm& world, int group_ranks, const CommMatrixSource& s) {
  if (s.matrix.empty() && s.routing.empty()) return std::nullopt;
  std::string text;
  bool ok = true;
  if (world.rank() == 0) {
    try {
      ZAYA_CHECK(s.matrix.empty() || s.routing.empty(), "give --matrix or --routing, not both");
      TrafficMatrix m = !s.matrix.empty() ? read_traffic_matrix(s.matrix)
                                          : traffic_matrix_from_routing(s.routing, group_ranks, s.selection);
      if (!s.write_to.empty()) write_file_atomic(s.write_to, format_traffic_matrix(m));
      text = m.source + "\n" + format_traffic_matrix(m);
    } catch (const Error& e) {
      ok = false;
      text = e.what();
    }
  }
  int64_t header[2] = {ok ? 1 : 0, int64_t(text.size())};
  world.broadcast(header, 2, DType::kI64, 0);
  text.resize(size_t(header[1]));
  world.broadcast(text.data(), text.size(), DType::kU8, 0);
  if (!header[0]) fail("{}", text);
  const size_t nl = text.find('\n');
  TrafficMatrix m = parse_traffic_matrix(text.substr(nl + 1), "the traffic matrix");
  m.source = text.substr(0, nl);
  return m;
}

std::vector<std::string> comm_rank_lines(Comm& world, int color) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  constexpr size_t kLine = 192;  // fixed-width records, so one all_gather collects them
  std::string mine = fmt::format("Rank {:3} Group {:3} Pid {:7} on {}", world.rank(), color, getpid(), host);
  mine.resize(kLine, '\0');
  std::string all(kLine * size_t(world.size()), '\0');
  world.all_gather(mine.data(), all.data(), kLine, DType::kU8);
  std::vector<std::string> lines;
  for (int r = 0; r < world.size(); ++r) lines.emplace_back(all.c_str() + size_t(r) * kLine);
  return lines;
}

}  // namespace zaya
