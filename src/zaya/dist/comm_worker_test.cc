#include "zaya/dist/comm_worker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "zaya/core/error.h"

namespace zaya {
namespace {

TEST(CommWorker, RunsTasksInPostOrderOffTheCallingThread) {
  CommWorker w;
  EXPECT_TRUE(w.idle());
  std::vector<int> order;
  const std::thread::id caller = std::this_thread::get_id();
  bool elsewhere = true;
  std::vector<CommWorker::TaskPtr> tasks;
  for (int i = 0; i < 50; ++i)
    tasks.push_back(w.post([&, i] {
      if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the rest queue up behind it
      elsewhere = elsewhere && std::this_thread::get_id() != caller;
      order.push_back(i);
    }));
  w.wait(*tasks[49]);
  EXPECT_TRUE(w.idle());
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[size_t(i)], i);
  EXPECT_TRUE(elsewhere);
}

TEST(CommWorker, DrainWaitsForEveryTaskAndTestingDoesNotBlock) {
  CommWorker w;
  std::atomic<bool> release{false};
  int ran = 0;
  auto slow = w.post([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++ran;
  });
  auto next = w.post([&] { ++ran; });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(slow->done());
  EXPECT_FALSE(next->done());
  EXPECT_FALSE(w.idle());
  release = true;
  w.drain();
  EXPECT_TRUE(w.idle());
  EXPECT_TRUE(slow->done());
  EXPECT_TRUE(next->done());
  EXPECT_EQ(ran, 2);
}

TEST(CommWorker, AFailingTaskRethrowsOnWaitAndLaterTasksStillRun) {
  CommWorker w;
  auto bad = w.post([] { fail("MPI all_reduce failed on communicator 'dp'"); });
  int ran = 0;
  auto good = w.post([&] { ran = 1; });
  try {
    w.wait(*bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce failed on communicator 'dp'"), std::string::npos);
  }
  w.wait(*good);
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace zaya
