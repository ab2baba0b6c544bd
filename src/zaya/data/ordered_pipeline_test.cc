#include "zaya/data/ordered_pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace zaya {
namespace {

// Results come out in production order however long each item takes, and
// never more than max_in_flight items exist at once.
TEST(OrderedPipeline, KeepsOrderAndBoundsItemsInFlight) {
  for (int workers : {1, 2, 5}) {
    int next = 0;
    std::atomic<int> live{0}, most{0};
    std::vector<int> got;
    run_ordered_pipeline<int, int>(
        workers, 3,
        [&](int& x) {
          if (next == 200) return false;
          x = next++;
          most = std::max(most.load(), ++live);
          return true;
        },
        [&](int&& x, int& y) {
          std::this_thread::sleep_for(std::chrono::microseconds((x * 37) % 11 * 50));
          y = x * x;
        },
        [&](int& y) {
          got.push_back(y);
          --live;
        });
    ASSERT_EQ(got.size(), 200u);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(got[i], i * i);
    EXPECT_LE(most.load(), 3) << workers << " workers";
  }
}

// The error of the first failing item in order wins, and items before it are consumed.
TEST(OrderedPipeline, ErrorsSurfaceInOrder) {
  int next = 0, consumed = 0;
  auto run = [](auto&&... args) { run_ordered_pipeline<int, int>(args...); };
  EXPECT_THROW(run(
                   4, 8,
                   [&](int& x) {
                     if (next == 100) return false;
                     x = next++;
                     return true;
                   },
                   [](int&& x, int& y) {
                     if (x == 40 || x == 60) throw std::runtime_error(x == 40 ? "forty" : "sixty");
                     y = x;
                   },
                   [&](int&) { ++consumed; }),
               std::runtime_error);
  EXPECT_EQ(consumed, 40);
  next = 0;
  try {
    run_ordered_pipeline<int, int>(
        3, 4,
        [&](int& x) {
          if (next == 10) throw std::runtime_error("read error");
          x = next++;
          return true;
        },
        [](int&& x, int& y) { y = x; }, [&](int&) {});
    ADD_FAILURE() << "expected the producer's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "read error");
  }
  // A consumer's exception stops everything.
  next = 0;
  EXPECT_THROW(run(
                   2, 4,
                   [&](int& x) {
                     x = next++;
                     return true;  // endless
                   },
                   [](int&& x, int& y) { y = x; },
                   [](int& y) {
                     if (y == 5) throw std::runtime_error("stop");
                   }),
               std::runtime_error);
}

}  // namespace
}  // namespace zaya
