// run_collectively on 2, 3 and 4 ranks: every rank throws, rank 0 alone
// reports, and the message names the ranks that failed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

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

// What check_same_on_all_ranks threw on this rank ("" when nothing), and
// whether every rank agrees on having thrown (an all-reduce of the flags, so
// a rank that returned while another threw fails the test on every rank).
struct SameTextOutcome {
  std::string message;
  bool print_here = false;
  int ranks_that_threw = 0;
};
SameTextOutcome same_text(const std::string& text) {
  Comm& c = world();
  SameTextOutcome out;
  try {
    check_same_on_all_ranks(c, text, "the config");
  } catch (const CollectiveError& e) {
    out.message = e.what();
    out.print_here = e.print_here();
  }
  const int64_t threw = out.message.empty() ? 0 : 1;
  int64_t sum = 0;
  c.all_reduce(&threw, &sum, 1, DType::kI64, ReduceOp::kSum);
  out.ranks_that_threw = int(sum);
  return out;
}

std::string differs_message(const std::string& ranks) {
  return fmt::format(
      "the config differs between ranks: rank(s) {} do not match rank 0; start every rank with the same files and "
      "options",
      ranks);
}

TEST(MpiCollective, SameTextOnEveryRankPasses) {
  // A config-sized text, identical everywhere.
  std::string text;
  for (int i = 0; i < 2000; ++i) text += fmt::format("key_{} = {}\n", i, i * 7);
  const SameTextOutcome out = same_text(text);
  EXPECT_EQ(out.message, "");
  EXPECT_EQ(out.ranks_that_threw, 0);
  EXPECT_EQ(same_text("").ranks_that_threw, 0);
}

TEST(MpiCollective, DifferingTextIsReportedByRankZero) {
  Comm& c = world();
  const SameTextOutcome out = same_text(c.rank() == 1 ? "b" : "a");
  EXPECT_EQ(out.message, differs_message("1"));
  EXPECT_EQ(out.ranks_that_threw, c.size());  // every rank stops
  EXPECT_EQ(out.print_here, c.rank() == 0);   // one reports
}

TEST(MpiCollective, EveryDifferingRankIsNamed) {
  Comm& c = world();
  const int n = c.size();
  // The last rank alone, its text differing from the others' in its last byte.
  std::string text(4096, 'x');
  if (c.rank() == n - 1) text.back() = 'y';
  SameTextOutcome out = same_text(text);
  EXPECT_EQ(out.message, differs_message(std::to_string(n - 1)));
  EXPECT_EQ(out.ranks_that_threw, n);
  // Texts that differ only in length (a prefix of the others').
  out = same_text(c.rank() == n - 1 ? "train.steps = 10" : "train.steps = 100");
  EXPECT_EQ(out.message, differs_message(std::to_string(n - 1)));
  // Rank 0 is the odd one out: every other rank is named.
  std::vector<std::string> others;
  for (int r = 1; r < n; ++r) others.push_back(std::to_string(r));
  out = same_text(c.rank() == 0 ? "seed = 1" : "seed = 2");
  EXPECT_EQ(out.message, differs_message(fmt::format("{}", fmt::join(others, ", "))));
  EXPECT_EQ(out.ranks_that_threw, n);
  EXPECT_EQ(out.print_here, c.rank() == 0);
  // Every rank with its own text.
  out = same_text(fmt::format("rank {}", c.rank()));
  EXPECT_EQ(out.message, differs_message(fmt::format("{}", fmt::join(others, ", "))));
}

}  // namespace
}  // namespace zaya
