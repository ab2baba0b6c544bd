#include "zaya/core/work_pool.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <thread>
#include <vector>

namespace zaya {
namespace {

// Every index runs exactly once, on a worker below the thread count, over
// many short loops back to back (a helper late for one loop must not run
// an index of the next one, nor count it twice).
TEST(WorkPool, EveryIndexOnceOnAValidWorker) {
  for (int threads : {1, 2, 3, 4}) {
    for (int64_t n : {0, 1, 2, 7, 64, 1000}) {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> bad_worker{0};
        pool_for(n, threads, [&](int64_t i, int worker) {
          hits[size_t(i)].fetch_add(1);
          if (worker < 0 || worker >= threads) bad_worker.fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << threads << " " << n << " " << i;
        ASSERT_EQ(bad_worker.load(), 0);
      }
    }
  }
  EXPECT_GE(pool_helpers(), 3);
}

// The caller sees every index's writes when the loop returns.
TEST(WorkPool, ResultsVisibleAfterTheLoop) {
  std::vector<int64_t> out(4096);
  for (int rep = 0; rep < 100; ++rep) {
    pool_for(int64_t(out.size()), 2, [&](int64_t i, int) { out[size_t(i)] = i * 3 + rep; });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], int64_t(i) * 3 + rep);
  }
}

// A loop inside a loop (from a helper or the caller) runs serially as worker 0.
TEST(WorkPool, NestedLoopRunsSerially) {
  std::vector<std::atomic<int>> hits(16 * 8);
  std::atomic<int> nested_not_zero{0};
  pool_for(16, 2, [&](int64_t i, int) {
    pool_for(8, 2, [&](int64_t j, int worker) {
      hits[size_t(i * 8 + j)].fetch_add(1);
      if (worker != 0) nested_not_zero.fetch_add(1);
    });
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(nested_not_zero.load(), 0);
}

// Inside an OpenMP region the loop runs on the calling thread.
TEST(WorkPool, InsideOpenMpRegionRunsSerially) {
  std::atomic<int> total{0}, not_zero{0};
#pragma omp parallel num_threads(2)
  pool_for(10, 2, [&](int64_t, int worker) {
    total.fetch_add(1);
    if (worker != 0) not_zero.fetch_add(1);
  });
  EXPECT_EQ(total.load(), 10 * 2);
  EXPECT_EQ(not_zero.load(), 0);
}

// Two threads' loops at once: one gets the pool, the other runs serially; both complete.
TEST(WorkPool, ConcurrentCallers) {
  constexpr int64_t kN = 500;
  auto caller = [](std::vector<int>& out) {
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::atomic<int>> hits(kN);
      pool_for(kN, 2, [&](int64_t i, int) { hits[size_t(i)].fetch_add(1); });
      for (auto& h : hits) out.push_back(h.load());
    }
  };
  std::vector<int> a, b;
  std::thread t([&] { caller(a); });
  caller(b);
  t.join();
  for (int v : a) ASSERT_EQ(v, 1);
  for (int v : b) ASSERT_EQ(v, 1);
  EXPECT_EQ(a.size(), size_t(50 * kN));
  EXPECT_EQ(b.size(), size_t(50 * kN));
}

}  // namespace
}  // namespace zaya
