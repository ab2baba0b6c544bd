#include "zaya/dist/collective.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "zaya/core/error.h"

namespace zaya {
namespace {

// The error run_collectively throws for fn (nothing when fn succeeds).
template <typename Fn>
std::unique_ptr<CollectiveError> collective_error(Comm& comm, Fn fn) {
  try {
    run_collectively(comm, "loading the config", fn);
  } catch (const CollectiveError& e) {
    return std::make_unique<CollectiveError>(e);
  }
  return nullptr;
}

TEST(Collective, OneRankKeepsTheMessageAndWhoseFaultItWas) {
  auto self = make_self_comm();
  EXPECT_EQ(collective_error(*self, [] {}), nullptr);
  auto e = collective_error(*self, [] { fail("bad.toml: train.steps = 0 is invalid"); });
  ASSERT_NE(e, nullptr);
  EXPECT_STREQ(e->what(), "bad.toml: train.steps = 0 is invalid");  // no "on rank 0 of 1"
  EXPECT_FALSE(e->usage());
  EXPECT_TRUE(e->print_here());
  e = collective_error(*self, [] { fail_usage("--set train.stesp=3: unknown key"); });
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->usage());  // the program exits 2 for it
  EXPECT_TRUE(e->print_here());
}

// check_same_on_all_ranks needs several ranks to mean anything: its tests
// run under mpirun (tests/mpi/collective_test.cc, MpiCollective.SameText*).

}  // namespace
}  // namespace zaya
