#include "zaya/dist/comm_worker.h"

#include <exception>

#include "zaya/core/error.h"

namespace zaya {

CommWorker::~CommWorker() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
}

CommWorker::TaskPtr CommWorker::post(std::function<void()> fn) {
  auto task = std::make_shared<Task>();
  task->run_ = std::move(fn);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    pending_.fetch_add(1, std::memory_order_acq_rel);
    queue_.push_back(task);
  }
  work_cv_.notify_one();
  return task;
}

void CommWorker::drain() {
  if (idle()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return idle(); });
}

void CommWorker::wait(const Task& task) {
  if (!task.done()) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return task.done(); });
  }
  if (!task.error_.empty()) fail("{}", task.error_);
}

void CommWorker::loop() {
  // Runs everything posted before stop_ (the destructor waits for it all).
  for (;;) {
    TaskPtr task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task->run_();
    } catch (const std::exception& e) {
      task->error_ = e.what();
      if (task->error_.empty()) task->error_ = "a communication task failed";
    }
    task->run_ = nullptr;  // release what it captured before anyone is told it is done
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task->done_.store(true, std::memory_order_release);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
    done_cv_.notify_all();
  }
}

}  // namespace zaya
