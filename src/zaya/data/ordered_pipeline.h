#pragma once
// An ordered parallel map with bounded memory: one producer thread reads
// items, `workers` threads transform them, and the calling thread consumes
// the results strictly in production order, so the output does not depend on
// the number of workers. At most `max_in_flight` items exist at once (read,
// being transformed, or waiting for their turn), which bounds memory whatever
// the input size.
//
// Errors are kept in order too: an exception from the producer or a worker is
// rethrown on the calling thread when the consumer reaches that item's
// position; an exception from the consumer stops the producer and the workers
// and is rethrown once they have finished.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "zaya/core/error.h"

namespace zaya {

template <typename In, typename Out>
void run_ordered_pipeline(int workers, size_t max_in_flight, const std::function<bool(In&)>& produce,
                          const std::function<void(In&&, Out&)>& transform, const std::function<void(Out&)>& consume) {
  ZAYA_CHECK(workers >= 1 && max_in_flight >= 1, "ordered pipeline: workers {} and max_in_flight {} must be >= 1",
             workers, max_in_flight);
  struct Done {
    Out out;
    std::exception_ptr error;
  };
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::pair<uint64_t, In>> queue;  // produced, not yet taken by a worker (FIFO by index)
  size_t queue_head = 0;
  std::map<uint64_t, Done> done;
  uint64_t produced = 0, consumed = 0;
  bool producer_finished = false, stop = false;
  std::exception_ptr producer_error;

  std::thread producer([&] {
    try {
      for (;;) {
        {
          std::unique_lock lock(m);
          cv.wait(lock, [&] { return stop || produced - consumed < max_in_flight; });
          if (stop) break;
        }
        In item;
        if (!produce(item)) break;
        std::lock_guard lock(m);
        queue.emplace_back(produced++, std::move(item));
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(m);
      producer_error = std::current_exception();
    }
    std::lock_guard lock(m);
    producer_finished = true;
    cv.notify_all();
  });

  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (;;) {
        std::pair<uint64_t, In> job;
        {
          std::unique_lock lock(m);
          cv.wait(lock, [&] { return stop || queue_head < queue.size() || producer_finished; });
          if (stop || queue_head == queue.size()) return;
          job = std::move(queue[queue_head++]);
          if (queue_head == queue.size()) {
            queue.clear();
            queue_head = 0;
          }
        }
        Done d;
        try {
          transform(std::move(job.second), d.out);
        } catch (...) {
          d.error = std::current_exception();
        }
        std::lock_guard lock(m);
        done.emplace(job.first, std::move(d));
        cv.notify_all();
      }
    });

  std::exception_ptr error;
  try {
    for (;;) {
      std::optional<Done> next;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return done.count(consumed) > 0 || (producer_finished && consumed == produced); });
        auto it = done.find(consumed);
        if (it == done.end()) break;  // everything produced is consumed
        next.emplace(std::move(it->second));
        done.erase(it);
      }
      if (next->error) std::rethrow_exception(next->error);
      consume(next->out);
      std::lock_guard lock(m);
      ++consumed;
      cv.notify_all();
    }
    std::lock_guard lock(m);
    if (producer_error) error = producer_error;
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard lock(m);
    stop = true;
    cv.notify_all();
  }
  producer.join();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace zaya
