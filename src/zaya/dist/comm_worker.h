#pragma once
// The communication thread: runs tasks (blocking collectives, in
// dist/mpi_comm.cc) one at a time, in the order they were posted, while the
// thread that posted them goes on computing. This is how the non-blocking
// operations of the Comm layer (iall_reduce, ireduce_scatter_v, ...) run at the
// MPI library's speed: each becomes the library's *blocking* call on this
// thread, which progresses it at once, instead of a non-blocking one that
// progresses only when the caller enters MPI (and that Open MPI serves with
// its slower libnbc algorithms). docs/distributed.md, "How collectives run".
//
// With MPI_THREAD_SERIALIZED, the caller must not enter MPI while a task may be
// running: it calls drain() first (cheap when idle()), so every MPI call of the
// process still happens in program order, one at a time.
//
// A task may throw zaya::Error; wait() rethrows it on the waiting thread.
// Tasks that never finish are the watchdog's business (comm_watchdog.h).

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace zaya {

class CommWorker {
 public:
  class Task {
   public:
    bool done() const { return done_.load(std::memory_order_acquire); }

   private:
    friend class CommWorker;
    std::function<void()> run_;
    std::atomic<bool> done_{false};
    std::string error_;  // what run_ threw (empty: none)
  };
  using TaskPtr = std::shared_ptr<Task>;

  CommWorker() = default;
  ~CommWorker();  // waits for the posted tasks, then stops the thread
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Queues `fn` behind the tasks posted before it (starts the thread on first use).
  TaskPtr post(std::function<void()> fn);
  // No task queued or running. Only the posting thread may rely on it staying so.
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }
  // Blocks until idle().
  void drain();
  // Blocks until `task` is done; throws zaya::Error with its error, if it failed.
  void wait(const Task& task);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<TaskPtr> queue_;
  std::atomic<int64_t> pending_{0};  // posted and not yet done
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zaya
