// run_collectively on 2, 3 and 4 ranks: every rank throws, rank 0 alone
// reports, and the message names the ranks that failed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/core/error.h"
#include "zaya/dist/collective.h"

namespace zaya {
namespace {

using testing::world;

// What run_collectively threw on this rank: {message, usage, print_here}; message "" when nothing.
struct Thrown {
  std::string message;
  bool usage = false, print_here = false;
};
template <typename Fn>
Thrown thrown(Fn fn) {
  try {
    run_collectively(world(), "start-up", fn);
  } catch (const CollectiveError& e) {
    return {e.what(), e.usage(), e.print_here()};
  }
  return {};
}

TEST(MpiCollective, EveryRankFailsAlikeRankZeroReports) {
  Comm& c = world();
  const int n = c.size();
  EXPECT_EQ(thrown([] {}).message, "");
  // Every rank fails with the same usage error: "on all N ranks", printed once.
  Thrown t = thrown([] { fail_usage("--set train.stesp=3: unknown key"); });
  EXPECT_EQ(t.message, fmt::format("start-up failed on all {} ranks: --set train.stesp=3: unknown key", n));
  EXPECT_TRUE(t.usage);
  EXPECT_EQ(t.print_here, c.rank() == 0);
  // One rank fails: it is named, every rank stops, rank 0 reports it.
  t = thrown([&] { ZAYA_CHECK(c.rank() != n - 1, "injected on rank {}", c.rank()); });
  EXPECT_EQ(t.message, fmt::format("start-up failed on rank {} of {}: injected on rank {}", n - 1, n, n - 1));
  EXPECT_FALSE(t.usage);
  EXPECT_EQ(t.print_here, c.rank() == 0);
  // Ranks that fail differently: the first one's message, the others said to differ.
  t = thrown([&] { fail("rank {} failed", c.rank()); });
  EXPECT_EQ(t.message.rfind("start-up failed on ranks 0, 1", 0), 0u) << t.message;
  EXPECT_NE(t.message.find("(rank 0's message; the others differ): rank 0 failed"), std::string::npos) << t.message;
}

TEST(MpiCollective, DifferingTextIsReportedByRankZero) {
  Comm& c = world();
  try {
    check_same_on_all_ranks(c, c.rank() == 1 ? "b" : "a", "the config");
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 do not match rank 0"), std::string::npos) << e.what();
    EXPECT_EQ(e.print_here(), c.rank() == 0);
  }
}

}  // namespace
}  // namespace zaya
