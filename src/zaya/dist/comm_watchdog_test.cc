// The watchdog on a clock the test sets: what is reported, and when, follows
// from the clock's readings alone (no sleeps, no timing bounds), so these
// tests give the same answer on a loaded machine as on an idle one.
#include "zaya/dist/comm_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "zaya/core/error.h"

namespace zaya {
namespace {

std::atomic<double> watchdog_test_now{1000.0};
double watchdog_test_clock() { return watchdog_test_now.load(); }

// The messages a watchdog reported, in order.
struct Reports {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::string> messages;
  CommWatchdog::Expired sink() {
    return [this](const std::string& m) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        messages.push_back(m);
      }
      cv.notify_all();
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages.size();
  }
};

// Times in binary fractions, so `now - since` is exact and the boundary is tested exactly.
TEST(CommWatchdog, ACallPastItsTimeoutIsReportedOnceNamingTheCollective) {
  Reports rep;
  CommWatchdog dog(rep.sink(), watchdog_test_clock, 0.0, false);
  const std::string comm = "dp";
  watchdog_test_now = 1000.0;
  dog.arm(1, 0.5, "reduce_scatter_v", comm, 1, 2);
  watchdog_test_now = 1000.5;  // exactly the timeout: not past it
  dog.check();
  EXPECT_EQ(dog.expired(), 0);
  watchdog_test_now = 1000.625;
  dog.check();
  EXPECT_EQ(dog.expired(), 1);
  ASSERT_EQ(rep.count(), 1u);
  EXPECT_EQ(rep.messages[0],
            "reduce_scatter_v on communicator 'dp' (rank 1 of 2) did not complete within 0.5 s: a rank is missing, "
            "hung or failed");
  watchdog_test_now = 1010.0;  // still hung: no second report of the same call
  dog.check();
  dog.check();
  EXPECT_EQ(dog.expired(), 1);
  dog.disarm(1);
  // The next call on that slot is a new one: reported again when it hangs.
  dog.arm(1, 0.5, "all_gather_v", comm, 1, 2);
  watchdog_test_now = 1011.0;
  dog.check();
  EXPECT_EQ(dog.expired(), 2);
  ASSERT_EQ(rep.count(), 2u);
  EXPECT_EQ(rep.messages[1].rfind("all_gather_v on communicator 'dp' (rank 1 of 2)", 0), 0u) << rep.messages[1];
  dog.disarm(1);
}

TEST(CommWatchdog, CallsThatFinishInTimeAreNeverReported) {
  Reports rep;
  CommWatchdog dog(rep.sink(), watchdog_test_clock, 0.0, false);
  const std::string comm = "world";
  watchdog_test_now = 2000.0;
  for (int i = 0; i < 20; ++i) {
    {
      CommWatchdog::Armed main_call(dog, 0, 0.5, "all_reduce", comm, 0, 2);
      CommWatchdog::Armed worker_call(dog, 1, 0.5, "all_gather_v", comm, 0, 2);
      watchdog_test_now = watchdog_test_now + 0.25;
      dog.check();  // a tick while both calls run, within their timeout
    }
    watchdog_test_now = watchdog_test_now + 100.0;  // long after: nothing is armed any more
    dog.check();
  }
  EXPECT_EQ(rep.count(), 0u);
  EXPECT_EQ(dog.expired(), 0);
}

// Each slot is judged on its own: a hung communication thread is reported
// while the caller's calls keep finishing.
TEST(CommWatchdog, SlotsAreJudgedApart) {
  Reports rep;
  CommWatchdog dog(rep.sink(), watchdog_test_clock, 0.0, false);
  const std::string comm = "ep";
  watchdog_test_now = 3000.0;
  dog.arm(1, 2.0, "all_to_all_v", comm, 3, 4);
  for (int i = 0; i < 4; ++i) {
    CommWatchdog::Armed call(dog, 0, 2.0, "all_reduce", comm, 3, 4);
    watchdog_test_now = watchdog_test_now + 1.0;
    dog.check();
  }
  ASSERT_EQ(rep.count(), 1u);
  EXPECT_EQ(rep.messages[0].rfind("all_to_all_v on communicator 'ep' (rank 3 of 4) did not complete within 2 s", 0), 0u)
      << rep.messages[0];
  dog.disarm(1);
}

// A clock that may lag by its resolution: a call is reported only once it has
// certainly run past its timeout.
TEST(CommWatchdog, TheClockResolutionIsAddedToTheDeadline) {
  Reports rep;
  CommWatchdog dog(rep.sink(), watchdog_test_clock, 0.25, false);
  const std::string comm = "world";
  watchdog_test_now = 4000.0;
  dog.arm(0, 1.0, "broadcast", comm, 0, 2);
  watchdog_test_now = 4001.25;
  dog.check();
  EXPECT_EQ(dog.expired(), 0);
  watchdog_test_now = 4001.5;
  dog.check();
  EXPECT_EQ(dog.expired(), 1);
  dog.disarm(0);
}

// The watchdog's own thread does check()'s work: a call whose clock has run
// past its timeout is reported without anyone calling check(). The wait below
// is a bound on a hang, not a measurement (the report comes within a tick).
TEST(CommWatchdog, ItsThreadReportsAnExpiredCall) {
  Reports rep;
  CommWatchdog dog(rep.sink(), watchdog_test_clock, 0.0, true);
  const std::string comm = "cp";
  watchdog_test_now = 5000.0;
  dog.arm(0, 0.01, "all_gather", comm, 0, 2);  // tick: 1 ms of real time
  watchdog_test_now = 5001.0;
  {
    std::unique_lock<std::mutex> lock(rep.mutex);
    ASSERT_TRUE(rep.cv.wait_for(lock, std::chrono::seconds(60), [&] { return !rep.messages.empty(); }))
        << "the watchdog thread reported nothing";
    EXPECT_EQ(rep.messages[0].rfind("all_gather on communicator 'cp' (rank 0 of 2)", 0), 0u) << rep.messages[0];
  }
  dog.disarm(0);
  EXPECT_EQ(dog.expired(), 1);
}

TEST(CommWatchdog, CheckIsOnlyForAWatchdogWithoutItsThread) {
  CommWatchdog dog([](const std::string&) {}, watchdog_test_clock, 0.0, true);
  try {
    dog.check();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("assertion '!own_thread_' failed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zaya
