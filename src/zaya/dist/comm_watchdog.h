#pragma once
// The deadline of blocking collectives. A blocking MPI call cannot be
// interrupted, so instead of polling a non-blocking one (which Open MPI serves
// with slower algorithms), the calling thread arms this watchdog around the
// call, and a thread of its own checks the armed calls every tick. A call
// still running after its timeout means a peer is missing, hung or failed:
// the watchdog hands on_expired a message naming the collective, the
// communicator and the rank, and the MPI layer then ends the process (the
// launcher stops the others). docs/distributed.md, "How collectives run".
//
// Arming and disarming cost a few plain stores and one read of the coarse
// monotonic clock (no lock, no system call: a 1 KiB all-reduce takes about a
// microsecond); the thread starts on the first arm and wakes every tick =
// min(0.25 s, smallest timeout / 10). One slot per thread that makes blocking
// calls (the caller's, the communication thread's); each slot has that one
// writer, and the watchdog thread reads it as a sequence lock.
//
// The clock is a parameter: the tests drive a watchdog on a clock they set,
// without its thread, calling check() where the thread would, so what is
// reported and when is decided by the clock's readings, not by sleeps.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace zaya {

class CommWatchdog {
 public:
  static constexpr int kSlots = 2;
  using Expired = std::function<void(const std::string& message)>;
  // Seconds on a monotonic clock.
  using Clock = double (*)();

  // On CLOCK_MONOTONIC_COARSE, with its own thread.
  explicit CommWatchdog(Expired on_expired);
  // On `clock`, whose readings may lag by up to `clock_resolution` seconds (a
  // call is reported once it has run more than timeout + resolution). With
  // `own_thread` false no thread starts: check() does its work when called.
  CommWatchdog(Expired on_expired, Clock clock, double clock_resolution, bool own_thread);
  ~CommWatchdog();
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

  // `what` must be a literal; `comm` must outlive the call (the communicator's name).
  void arm(int slot, double timeout_seconds, const char* what, const std::string& comm, int rank, int size);
  void disarm(int slot);
  // Number of expirations reported so far.
  int expired() const;
  // One pass of the thread's tick: reports every armed call that has run past
  // its timeout (each arming once). Only on a watchdog without its own thread.
  void check();

  // Arms on construction and disarms on destruction (also when the call throws).
  class Armed {
   public:
    Armed(CommWatchdog& dog, int slot, double timeout_seconds, const char* what, const std::string& comm, int rank,
          int size)
        : dog_(dog), slot_(slot) {
      dog_.arm(slot, timeout_seconds, what, comm, rank, size);
    }
    ~Armed() { dog_.disarm(slot_); }
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    CommWatchdog& dog_;
    int slot_;
  };

 private:
  // seq is odd while the owner writes the slot; a reading that saw seq change
  // is dropped until the next tick. `reported` is the scanning thread's own:
  // the seq of the arming it last reported, so one call is reported once.
  struct Slot {
    std::atomic<uint64_t> seq{0};
    std::atomic<bool> armed{false};
    std::atomic<double> since{0}, timeout{0};
    std::atomic<const char*> what{""};
    std::atomic<const std::string*> comm{nullptr};
    std::atomic<int> rank{0}, size{1};
    uint64_t reported = 0;
  };
  void loop();
  void scan();  // the body of a tick: the watchdog thread's, or check()'s caller's

  Expired on_expired_;
  Clock clock_;
  double resolution_;
  bool own_thread_;
  Slot slots_[kSlots];
  std::atomic<double> tick_{0.25};
  std::atomic<int> expired_{0};
  std::once_flag started_;
  std::mutex mutex_;  // guards stop_ (the thread's sleep), nothing on the arming path
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zaya
