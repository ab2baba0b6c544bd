#include "zaya/dist/comm_watchdog.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>

#include "zaya/core/error.h"
#include "zaya/core/timer.h"

namespace zaya {

CommWatchdog::CommWatchdog(Expired on_expired) : on_expired_(std::move(on_expired)) {}

CommWatchdog::~CommWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void CommWatchdog::arm(int slot, double timeout_seconds, const char* what, const std::string& comm, int rank,
                       int size) {
  ZAYA_ASSERT(slot >= 0 && slot < kSlots && timeout_seconds > 0);
  const double now = now_seconds();
  std::lock_guard<std::mutex> lock(mutex_);
  slots_[slot] = Slot{true, now, timeout_seconds, what, &comm, rank, size};
  tick_ = std::clamp(timeout_seconds / 10, 0.001, tick_);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void CommWatchdog::disarm(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_[slot].armed = false;
}

int CommWatchdog::expired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return expired_;
}

void CommWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::duration<double>(tick_), [this] { return stop_; });
    if (stop_) break;
    const double now = now_seconds();
    for (Slot& s : slots_) {
      if (!s.armed || now - s.since <= s.timeout) continue;
      s.armed = false;  // reported once
      ++expired_;
      const std::string message = fmt::format(
          "{} on communicator '{}' (rank {} of {}) did not complete within {} s: a rank is missing, hung or failed",
          s.what, *s.comm, s.rank, s.size, s.timeout);
      lock.unlock();
      on_expired_(message);
      lock.lock();
    }
  }
}

}  // namespace zaya
