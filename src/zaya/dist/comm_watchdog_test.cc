#include "zaya/dist/comm_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "zaya/core/timer.h"

namespace zaya {
namespace {

struct Report {
  std::mutex mutex;
  std::string message;
  double at = 0;
};

TEST(CommWatchdog, ACallPastItsTimeoutIsReportedOnceNamingTheCollective) {
  Report rep;
  CommWatchdog dog([&](const std::string& m) {
    std::lock_guard<std::mutex> lock(rep.mutex);
    rep.message = m;
    rep.at = now_seconds();
  });
  const std::string comm = "dp";
  const double t0 = now_seconds();
  {
    CommWatchdog::Armed armed(dog, 1, 0.1, "reduce_scatter_v", comm, 1, 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the "hung" call
  }
  EXPECT_EQ(dog.expired(), 1);
  std::lock_guard<std::mutex> lock(rep.mutex);
  EXPECT_EQ(rep.message,
            "reduce_scatter_v on communicator 'dp' (rank 1 of 2) did not complete within 0.1 s: a rank is missing, "
            "hung or failed");
  EXPECT_GE(rep.at - t0, 0.1);
  EXPECT_LT(rep.at - t0, 0.35);  // within a tick or two of the deadline
}

TEST(CommWatchdog, CallsThatFinishInTimeAreNeverReported) {
  std::atomic<int> reports{0};
  CommWatchdog dog([&](const std::string&) { ++reports; });
  const std::string comm = "world";
  for (int i = 0; i < 20; ++i) {
    CommWatchdog::Armed main_call(dog, 0, 0.05, "all_reduce", comm, 0, 2);
    CommWatchdog::Armed worker_call(dog, 1, 0.05, "all_gather_v", comm, 0, 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing is armed any more
  EXPECT_EQ(reports, 0);
  EXPECT_EQ(dog.expired(), 0);
}

}  // namespace
}  // namespace zaya
