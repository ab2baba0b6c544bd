// The set-up steps of zaya bench comm on a single-rank world: groups, the
// traffic matrix (file, routing loads, written copy, errors) and the rank
// lines. tests/mpi/bench_comm_test.cc runs them on several ranks.
#include "zaya/bench/comm_groups.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(CommGroups, NoSplitRunsOnTheWorld) {
  auto world = make_self_comm();
  const CommGroups g = split_comm_groups(*world, parse_split(""), "");
  EXPECT_EQ(g.split, nullptr);
  EXPECT_EQ(g.group, world.get());
  EXPECT_EQ(g.groups, 1);
  EXPECT_EQ(g.color, 0);
}

TEST(CommGroups, SplitMakesItsOwnCommunicator) {
  auto world = make_self_comm();
  const CommGroups g = split_comm_groups(*world, parse_split("XOR 5"), "XOR 5");
  ASSERT_NE(g.split, nullptr);
  EXPECT_EQ(g.group, g.split.get());
  EXPECT_EQ(g.group->name(), "bench-group");
  EXPECT_EQ(g.color, 5);  // 0 XOR 5
  EXPECT_EQ(g.groups, 1);
}

TEST(CommGroups, MatrixFromAFileOrRoutingLoads) {
  auto world = make_self_comm();
  EXPECT_FALSE(load_comm_matrix(*world, 1, {}).has_value());
  testing::TempDir dir;
  const std::string file = dir.write("m.txt", "# two ranks\n1 3\n2, 2\n");
  const std::optional<TrafficMatrix> m = load_comm_matrix(*world, 1, {file, "", {}, dir.file("copy.txt")});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->n, 2);
  EXPECT_EQ(m->w, (std::vector<double>{1, 3, 2, 2}));
  EXPECT_EQ(m->source, read_traffic_matrix(file).source);
  EXPECT_EQ(testing::read_file(dir.file("copy.txt")), format_traffic_matrix(read_traffic_matrix(file)));
  // Routing loads of 4 experts over groups of 2 ranks: every row alike.
  const std::string metrics =
      dir.write("metrics.jsonl", "{\"step\":5,\"routing\":[{\"layer\":1,\"load\":[0.5,0.3,0.1,0.1],\"skip\":0.0}]}\n");
  const std::optional<TrafficMatrix> r = load_comm_matrix(*world, 2, {"", metrics, {-1, "mean"}, ""});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->n, 2);
  EXPECT_NEAR(r->at(0, 0), 0.8, 1e-12);
  EXPECT_NEAR(r->at(1, 1), 0.2, 1e-12);
  EXPECT_NE(r->source.find("routing"), std::string::npos) << r->source;
}

TEST(CommGroups, MatrixErrors) {
  auto world = make_self_comm();
  testing::TempDir dir;
  const std::string good = dir.write("m.txt", "1 2\n3 4\n");
  const std::string bad = dir.write("bad.txt", "1 2\n3 x\n");
  expect_error([&] { load_comm_matrix(*world, 1, {good, good, {}, ""}); }, "give --matrix or --routing, not both");
  expect_error([&] { load_comm_matrix(*world, 1, {bad, "", {}, ""}); }, "bad.txt:2: 'x' is not a non-negative number");
  const std::string metrics = dir.write("metrics.jsonl", "{\"step\":5,\"routing\":[{\"layer\":1,\"load\":[1,1]}]}\n");
  expect_error([&] { load_comm_matrix(*world, 2, {"", metrics, {-1, "7"}, ""}); }, "no routing record for layer 7");
}

TEST(CommGroups, RankLinesNameRankGroupPidAndHost) {
  auto world = make_self_comm();
  const std::vector<std::string> lines = comm_rank_lines(*world, 3);
  ASSERT_EQ(lines.size(), 1u);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(lines[0], fmt::format("Rank   0 Group   3 Pid {:7} on {}", getpid(), host));
}

}  // namespace
}  // namespace zaya
