#include "zaya/dist/comm_watchdog.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <ctime>

#include "zaya/core/error.h"

namespace zaya {

CommWatchdog::~CommWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

namespace {

// CLOCK_MONOTONIC_COARSE: the kernel's tick-resolution clock, read from the
// vDSO without the TSC arithmetic; plenty for deadlines of a second or more.
double coarse_now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The coarse clock's resolution: a call is reported only once it has
// certainly run past its timeout.
double coarse_resolution_seconds() {
  timespec ts{};
  clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

CommWatchdog::CommWatchdog(Expired on_expired)
    : CommWatchdog(std::move(on_expired), coarse_now_seconds, coarse_resolution_seconds(), true) {}

CommWatchdog::CommWatchdog(Expired on_expired, Clock clock, double clock_resolution, bool own_thread)
    : on_expired_(std::move(on_expired)), clock_(clock), resolution_(clock_resolution), own_thread_(own_thread) {
  ZAYA_ASSERT(clock_ != nullptr && resolution_ >= 0);
}

void CommWatchdog::arm(int slot, double timeout_seconds, const char* what, const std::string& comm, int rank,
                       int size) {
  ZAYA_ASSERT(slot >= 0 && slot < kSlots && timeout_seconds > 0);
  Slot& s = slots_[slot];
  const uint64_t q = s.seq.load(std::memory_order_relaxed);
  s.seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.since.store(clock_(), std::memory_order_relaxed);
  s.timeout.store(timeout_seconds, std::memory_order_relaxed);
  s.what.store(what, std::memory_order_relaxed);
  s.comm.store(&comm, std::memory_order_relaxed);
  s.rank.store(rank, std::memory_order_relaxed);
  s.size.store(size, std::memory_order_relaxed);
  s.armed.store(true, std::memory_order_relaxed);
  s.seq.store(q + 2, std::memory_order_release);
  const double tick = std::max(0.001, timeout_seconds / 10);
  if (tick < tick_.load(std::memory_order_relaxed)) tick_.store(tick, std::memory_order_relaxed);
  if (own_thread_) std::call_once(started_, [this] { thread_ = std::thread([this] { loop(); }); });
}

void CommWatchdog::disarm(int slot) {
  Slot& s = slots_[slot];
  const uint64_t q = s.seq.load(std::memory_order_relaxed);
  s.seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.armed.store(false, std::memory_order_relaxed);
  s.seq.store(q + 2, std::memory_order_release);
}

int CommWatchdog::expired() const { return expired_.load(std::memory_order_acquire); }

void CommWatchdog::check() {
  ZAYA_ASSERT(!own_thread_);  // `reported` has one reader: the thread, or check()'s caller
  scan();
}

void CommWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::duration<double>(tick_.load(std::memory_order_relaxed)), [this] { return stop_; });
    if (stop_) break;
    lock.unlock();  // the mutex guards stop_ alone; on_expired may take its time
    scan();
    lock.lock();
  }
}

void CommWatchdog::scan() {
  const double now = clock_();
  for (Slot& s : slots_) {
    const uint64_t q = s.seq.load(std::memory_order_acquire);
    if (q % 2 == 1 || q == s.reported) continue;  // being written, or this arming was reported
    const bool armed = s.armed.load(std::memory_order_relaxed);
    const double since = s.since.load(std::memory_order_relaxed), timeout = s.timeout.load(std::memory_order_relaxed);
    const char* what = s.what.load(std::memory_order_relaxed);
    const std::string* comm = s.comm.load(std::memory_order_relaxed);
    const int rank = s.rank.load(std::memory_order_relaxed), size = s.size.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != q) continue;  // rewritten while read
    if (!armed || now - since <= timeout + resolution_) continue;
    s.reported = q;
    expired_.fetch_add(1, std::memory_order_release);
    on_expired_(fmt::format(
        "{} on communicator '{}' (rank {} of {}) did not complete within {} s: a rank is missing, hung or failed", what,
        *comm, rank, size, timeout));
  }
}

}  // namespace zaya
