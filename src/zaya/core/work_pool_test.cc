#include "zaya/core/work_pool.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "zaya/core/error.h"

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

// Uneven indices (a few long, most empty) over many loops: each index once,
// and a long index on one worker does not hold the others' up (every index
// still runs; the caller returns only after the long ones).
TEST(WorkPool, UnevenWorkManyLoops) {
  for (int threads : {1, 2, 4}) {
    for (int rep = 0; rep < 300; ++rep) {
      const int64_t n = 3 + rep % 29;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<int64_t> out(static_cast<size_t>(n), -1);
      pool_for(n, threads, [&](int64_t i, int) {
        if ((i + rep) % 7 == 0) {  // a long index: ~20 us of work
          const auto t0 = std::chrono::steady_clock::now();
          while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(20)) {
          }
        }
        hits[size_t(i)].fetch_add(1);
        out[size_t(i)] = i * i + rep;
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[size_t(i)].load(), 1) << threads << " " << rep << " " << i;
        ASSERT_EQ(out[size_t(i)], i * i + rep);
      }
    }
  }
}

// An exception in f reaches the caller (the first one, whichever worker threw
// it), no index runs twice, and the pool serves the next loop as before.
TEST(WorkPool, ExceptionPropagatesToTheCaller) {
  for (int threads : {1, 2, 4}) {
    for (int rep = 0; rep < 50; ++rep) {
      const int64_t n = 64;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      EXPECT_THROW(pool_for(n, threads,
                            [&](int64_t i, int) {
                              hits[size_t(i)].fetch_add(1);
                              if (i == (rep * 7) % n) ZAYA_CHECK(false, "index {} failed", i);
                            }),
                   Error);
      for (auto& h : hits) ASSERT_LE(h.load(), 1);
      std::vector<std::atomic<int>> again(static_cast<size_t>(n));
      pool_for(n, threads, [&](int64_t i, int) { again[size_t(i)].fetch_add(1); });
      for (auto& h : again) ASSERT_EQ(h.load(), 1);
    }
  }
  try {  // the message is the thrower's
    pool_for(8, 2, [](int64_t i, int) {
      if (i == 5) throw std::runtime_error("five");
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "five");
  }
}

// A loop started from inside a loop body on the caller (worker 0) runs
// serially on it too, and the outer loop still completes.
TEST(WorkPool, NestedOnTheCallerRunsSerially) {
  std::atomic<int> inner{0}, inner_not_zero{0};
  std::thread::id caller = std::this_thread::get_id();
  pool_for(64, 2, [&](int64_t, int) {
    if (std::this_thread::get_id() != caller) {  // a helper: slow, so that the caller takes indices too
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      return;
    }
    pool_for(16, 2, [&](int64_t, int worker) {
      inner.fetch_add(1);
      if (worker != 0) inner_not_zero.fetch_add(1);
    });
  });
  EXPECT_EQ(inner.load() % 16, 0);
  EXPECT_GE(inner.load(), 16);
  EXPECT_EQ(inner_not_zero.load(), 0);
}

// Passive waiting (ZAYA_POOL_SPIN_US=0: every wait is a futex sleep) over
// many short loops: nothing lost between a wake and a sleep. The settings are
// read again when the thread count changes.
TEST(WorkPool, PassiveWaitingManyLoops) {
  ASSERT_EQ(setenv("ZAYA_POOL_SPIN_US", "0", 1), 0);
  for (int threads : {5, 2, 3}) {
    for (int rep = 0; rep < 2000; ++rep) {
      const int64_t n = 2 + rep % 5;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool_for(n, threads, [&](int64_t i, int) {
        const auto t0 = std::chrono::steady_clock::now();  // ~2 us each: time for a sleeping helper to join in
        while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(2)) {
        }
        hits[size_t(i)].fetch_add(1);
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " " << rep;
    }
  }
  unsetenv("ZAYA_POOL_SPIN_US");
  pool_for(4, 4, [](int64_t, int) {});  // back to the default settings
}

TEST(WorkPool, WaitSettingsFromTheEnvironment) {
  // Default: 1 ms, adaptive; more threads than CPUs: 20 us, fixed.
  PoolWaitSettings s = pool_wait_settings_from(nullptr, nullptr, 2, 2);
  EXPECT_EQ(s.spin_us, 1000);
  EXPECT_TRUE(s.adaptive);
  EXPECT_FALSE(s.openmp_regions);
  s = pool_wait_settings_from(nullptr, nullptr, 4, 2);
  EXPECT_EQ(s.spin_us, 20);
  EXPECT_FALSE(s.adaptive);
  // OMP_WAIT_POLICY (any case).
  s = pool_wait_settings_from(nullptr, "Active", 2, 2);
  EXPECT_EQ(s.spin_us, 1000000);
  EXPECT_FALSE(s.adaptive);
  s = pool_wait_settings_from(nullptr, "PASSIVE", 2, 2);
  EXPECT_TRUE(s.openmp_regions);
  // ZAYA_POOL_SPIN_US wins over both, fixed.
  s = pool_wait_settings_from("0", "passive", 2, 2);
  EXPECT_EQ(s.spin_us, 0);
  EXPECT_FALSE(s.openmp_regions);
  EXPECT_FALSE(s.adaptive);
  s = pool_wait_settings_from("250", nullptr, 8, 2);
  EXPECT_EQ(s.spin_us, 250);
  EXPECT_FALSE(s.adaptive);
  s = pool_wait_settings_from("", nullptr, 2, 2);  // empty: unset
  EXPECT_EQ(s.spin_us, 1000);
  for (const char* bad : {"-1", "abc", "10us", "1000001", " "}) {
    try {
      pool_wait_settings_from(bad, nullptr, 2, 2);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ZAYA_POOL_SPIN_US"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace zaya
