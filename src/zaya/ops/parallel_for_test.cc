// ops/parallel_for.h: which loops open an OpenMP region, and that the ops give
// the same bits whether their loops run serially or over a team.
#include "zaya/ops/parallel_for.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "zaya/ops/residual_scale.h"
#include "zaya/ops/rmsnorm.h"
#include "zaya/ops/serial_if.h"

namespace zaya {
namespace {

// Sets the team size for a scope.
class Threads {
 public:
  explicit Threads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved_); }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;

 private:
  int saved_;
};

// Runs a loop of n indices through `run` and reports whether any index ran
// inside a parallel region, checking every index ran exactly once.
template <typename Run>
bool ran_in_region(int64_t n, Run run) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> in_region{false};
  run([&](int64_t i) {
    hits[static_cast<size_t>(i)].fetch_add(1);
    if (omp_in_parallel()) in_region = true;
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  return in_region;
}

TEST(ParallelFor, SmallLoopsRunOnTheCaller) {
  Threads team(2);
  EXPECT_FALSE(ran_in_region(16, [](auto body) { parallel_for(16, kParallelMinWork - 1, body); }));
  EXPECT_TRUE(ran_in_region(16, [](auto body) { parallel_for(16, kParallelMinWork, body); }));
  // One index never opens a region, whatever its size.
  EXPECT_FALSE(ran_in_region(1, [](auto body) { parallel_for(1, int64_t(1) << 30, body); }));
  // A serial body sees one thread (a library it calls stays on it), and the
  // team size is back afterwards.
  int seen = 0;
  parallel_for(4, 16, [&](int64_t) { seen = omp_get_max_threads(); });
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(omp_get_max_threads(), 2);
}

TEST(ParallelFor, OneThreadOrASerialScopeOpensNoRegion) {
  const int64_t big = int64_t(1) << 30;
  {
    Threads team(1);
    EXPECT_FALSE(ran_in_region(16, [&](auto body) { parallel_for(16, big, body); }));
  }
  Threads team(2);
  {
    SerialIf serial(true);
    EXPECT_FALSE(ran_in_region(16, [&](auto body) { parallel_for(16, big, body); }));
    EXPECT_FALSE(ran_in_region(
        12, [&](auto body) { parallel_for_2d(3, 4, big, [&](int64_t i, int64_t j) { body(i * 4 + j); }); }));
    int regions = 0;
    parallel_region(big, [&](int id, int nt) {
      EXPECT_EQ(id, 0);
      EXPECT_EQ(nt, 1);
      ++regions;
    });
    EXPECT_EQ(regions, 1);
  }
  // Inside a region a loop runs on its thread: no nested region (level 2).
  std::atomic<int> deepest{0};
#pragma omp parallel num_threads(2)
  parallel_for(4, big, [&](int64_t) {
    const int level = omp_get_level();
    if (level > deepest.load()) deepest = level;
  });
  EXPECT_EQ(deepest.load(), 1);
}

TEST(ParallelFor, EveryIndexOnceOverATeam) {
  Threads team(3);
  const int64_t big = int64_t(1) << 30;
  EXPECT_TRUE(ran_in_region(1000, [&](auto body) { parallel_for(1000, big, body); }));
  EXPECT_TRUE(ran_in_region(
      999, [&](auto body) { parallel_for_2d(27, 37, big, [&](int64_t i, int64_t j) { body(i * 37 + j); }); }));
  std::vector<int> ids(3, 0);
  parallel_region(big, [&](int id, int nt) {
    EXPECT_EQ(nt, 3);
    ids[static_cast<size_t>(id)] = 1;
  });
  EXPECT_EQ(ids, std::vector<int>({1, 1, 1}));
  std::vector<float> y(5000, 0.0f);
  parallel_for_simd(5000, big, [&](int64_t i) { y[static_cast<size_t>(i)] = float(i) * 0.5f; });
  for (int64_t i = 0; i < 5000; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], float(i) * 0.5f);
}

// The ops give the same bits serially (a SerialIf scope, as the decoder runs
// them) and over teams of 2 and 3, at a size above the threshold.
TEST(ParallelFor, OpsBitwiseSerialOrParallel) {
  const int64_t T = 64, D = 300;  // 19,200 floats: over kParallelMinWork
  ASSERT_GE(2 * T * D, kParallelMinWork);
  std::vector<float> x(T * D), w(D), h(T * D), hs(D), hb(D), rs(D), rb(D), g(T * D);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float((i * 7919) % 1000) / 500.0f - 1.0f;
    h[i] = float((i * 104729) % 997) / 400.0f - 1.2f;
    g[i] = float((i * 15485863) % 991) / 300.0f - 1.6f;
  }
  for (int64_t i = 0; i < D; ++i) {
    w[size_t(i)] = 0.5f + float(i % 13) / 10.0f;
    hs[size_t(i)] = 1.0f + float(i % 7) / 20.0f;
    hb[size_t(i)] = float(i % 5) / 50.0f;
    rs[size_t(i)] = 0.9f + float(i % 3) / 30.0f;
    rb[size_t(i)] = -float(i % 11) / 70.0f;
  }
  struct Result {
    std::vector<float> y, rstd, res, dh, dr, dhs, dhb, drs, drb;
  };
  auto run = [&] {
    Result r{std::vector<float>(T * D), std::vector<float>(T),     std::vector<float>(T * D),
             std::vector<float>(T * D), std::vector<float>(T * D), std::vector<float>(D),
             std::vector<float>(D),     std::vector<float>(D),     std::vector<float>(D)};
    rmsnorm_forward<float>(r.y.data(), r.rstd.data(), x.data(), w.data(), T, D, 1e-5f);
    residual_scale_forward<float>(r.res.data(), h.data(), hs.data(), hb.data(), x.data(), rs.data(), rb.data(), T, D);
    residual_scale_backward<float>(r.dh.data(), r.dhs.data(), r.dhb.data(), r.dr.data(), r.drs.data(), r.drb.data(),
                                   g.data(), h.data(), hs.data(), hb.data(), x.data(), rs.data(), rb.data(), T, D);
    return r;
  };
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
  };
  Threads team(3);
  Result serial;
  {
    SerialIf scope(true);
    serial = run();
  }
  for (int threads : {2, 3}) {
    Threads t(threads);
    const Result r = run();
    EXPECT_TRUE(same(r.y, serial.y)) << threads;
    EXPECT_TRUE(same(r.rstd, serial.rstd)) << threads;
    EXPECT_TRUE(same(r.res, serial.res)) << threads;
    EXPECT_TRUE(same(r.dh, serial.dh)) << threads;
    EXPECT_TRUE(same(r.dr, serial.dr)) << threads;
    EXPECT_TRUE(same(r.dhs, serial.dhs)) << threads;
    EXPECT_TRUE(same(r.dhb, serial.dhb)) << threads;
    EXPECT_TRUE(same(r.drs, serial.drs)) << threads;
    EXPECT_TRUE(same(r.drb, serial.drb)) << threads;
  }
}

}  // namespace
}  // namespace zaya
