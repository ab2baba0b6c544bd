#include "zaya/core/work_pool.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <omp.h>
#include <sched.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "zaya/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace zaya {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Sleeps while *word == expected (a futex: the kernel checks the value as it
// queues the thread, so a wake between the check and the sleep is not lost).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>& word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

// The CPUs this process may run on (libgomp's test for oversubscription).
int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return int(std::thread::hardware_concurrency());
  return CPU_COUNT(&set);
}

// How long a waiting worker spins (work_pool.h, "Waiting"), in microseconds:
// by default, on a machine found oversubscribed (helper, caller at the join),
// with more threads than CPUs, with OMP_WAIT_POLICY=ACTIVE.
constexpr int64_t kDefaultSpinUs = 1000;
constexpr int64_t kContendedHelperSpinUs = 50;
constexpr int64_t kContendedCallerSpinUs = 20;
constexpr int64_t kThrottledSpinUs = 20;
constexpr int64_t kActiveSpinUs = 1000000;
// The machine counts as oversubscribed while the runnable threads (the
// kernel's count in /proc/loadavg, sampled every kLoadSampleEvery by the
// caller and averaged over the last few samples) exceed the CPUs by more than
// kOversubscribedBy: the pool then spins only kContended*SpinUs, as the
// earlier pool always did (measured faster than long spins there).
constexpr std::chrono::milliseconds kLoadSampleEvery(50);
constexpr double kOversubscribedBy = 1.5;

// The kernel's count of runnable threads (the fourth field of /proc/loadavg,
// "running/total"), or -1 where it cannot be read.
int runnable_threads() {
  const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  const ssize_t k = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (k <= 0) return -1;
  buf[k] = '\0';
  const char* p = buf;
  for (int field = 0; field < 3 && p != nullptr; ++field) {
    p = std::strchr(p, ' ');
    if (p != nullptr) ++p;
  }
  if (p == nullptr || *p < '0' || *p > '9') return -1;
  return std::atoi(p);
}

}  // namespace

PoolWaitSettings pool_wait_settings_from(const char* spin_us, const char* omp_wait_policy, int threads, int cpus) {
  PoolWaitSettings s;
  if (spin_us != nullptr && *spin_us != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(spin_us, &end, 10);
    ZAYA_CHECK(end != spin_us && *end == '\0' && v >= 0 && v <= kActiveSpinUs,
               "ZAYA_POOL_SPIN_US='{}': expected a whole number of microseconds in [0, {}] (0: sleep at once; "
               "docs/performance.md, \"The work pool\")",
               spin_us, kActiveSpinUs);
    s.spin_us = v;
    return s;
  }
  const char* policy = omp_wait_policy == nullptr ? "" : omp_wait_policy;
  if (strcasecmp(policy, "passive") == 0) {
    s.openmp_regions = true;
    s.spin_us = 0;
  } else if (strcasecmp(policy, "active") == 0) {
    s.spin_us = kActiveSpinUs;
  } else {
    s.spin_us = threads > cpus ? kThrottledSpinUs : kDefaultSpinUs;
    s.adaptive = threads <= cpus;
  }
  return s;
}

namespace {

constexpr uint64_t kIndexMask = 0xFFFFFFFFull;
constexpr size_t kLine = 64;  // a cache line: words written by different threads sit on different lines

// The claim word holds the loop's generation (high 32 bits) and its next
// index (low 32 bits). A worker reads the claim, then the loop's description,
// then claims by compare-and-swap on the value it read: the swap succeeds only
// if no newer loop was published in between (publishing first moves the claim
// to the new generation with an index past any end), so a description read
// half-way through a publication is never used.
class WorkPool {
 public:
  // False when another thread's loop holds the pool.
  bool try_run(int64_t n, int threads, PoolChunkFn fn, void* ctx) {
    std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    if (threads != settings_threads_) {  // read once per thread count (the throttle depends on it)
      static const int cpus = available_cpus();
      const PoolWaitSettings s =
          pool_wait_settings_from(std::getenv("ZAYA_POOL_SPIN_US"), std::getenv("OMP_WAIT_POLICY"), threads, cpus);
      spin_us_.store(s.spin_us, std::memory_order_relaxed);
      adaptive_.store(s.adaptive, std::memory_order_relaxed);
      settings_threads_ = threads;
      cpus_ = cpus;
    }
    if (adaptive_.load(std::memory_order_relaxed)) sample_load();
    for (int have = helper_count_; have < threads - 1; ++have) {
      const int id = have + 1;
      std::thread([this, id] { helper(id); }).detach();
      helper_count_ = id;
    }
    const uint64_t g = ++generation_;
    claim_.store((g << 32) | kIndexMask, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    job_.fn.store(fn, std::memory_order_relaxed);
    job_.ctx.store(ctx, std::memory_order_relaxed);
    job_.n.store(n, std::memory_order_relaxed);
    job_.limit.store(threads, std::memory_order_relaxed);
    join_.done.store(0, std::memory_order_relaxed);
    claim_.store(g << 32, std::memory_order_release);
    wake_.seq.fetch_add(1, std::memory_order_seq_cst);
    if (wake_.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(wake_.seq, threads - 1);
    in_loop_ = true;
    work(0);
    in_loop_ = false;
    // The indices helpers hold: spin (they take microseconds), then sleep.
    const uint32_t all = uint32_t(n);
    auto pending = [&] { return join_.done.load(std::memory_order_acquire) < all; };
    if (spin_while(pending, kContendedCallerSpinUs)) {
      join_.caller_sleeping.store(true, std::memory_order_seq_cst);
      for (uint32_t d; (d = join_.done.load(std::memory_order_seq_cst)) < all;) futex_wait(join_.done, d);
      join_.caller_sleeping.store(false, std::memory_order_relaxed);
    }
    if (failed_.load(std::memory_order_acquire)) {
      std::exception_ptr e = std::move(error_);
      error_ = nullptr;
      failed_.store(false, std::memory_order_relaxed);
      lock.unlock();
      std::rethrow_exception(e);
    }
    return true;
  }

  int helpers() {
    std::lock_guard<std::mutex> lock(busy_);
    return helper_count_;
  }

  // True on a helper, and on a caller inside its loop: a loop from there runs serially.
  static thread_local bool in_loop_;

 private:
  // Spins while pred() holds, for the spin time (at most contended_us while
  // the machine is found oversubscribed), looking at the clock every 64
  // pauses; returns whether pred() still holds (the caller then sleeps).
  template <typename Pred>
  bool spin_while(Pred pred, int64_t contended_us) {
    using Clock = std::chrono::steady_clock;
    if (!pred()) return false;
    int64_t us = spin_us_.load(std::memory_order_relaxed);
    if (contended_.load(std::memory_order_relaxed)) us = std::min(us, contended_us);
    if (us <= 0) return true;
    const Clock::time_point t0 = Clock::now();
    const Clock::duration budget = std::chrono::microseconds(us);
    for (int k = 1;; ++k) {
      cpu_relax();
      if (!pred()) return false;
      if (k % 64 == 0 && Clock::now() - t0 >= budget) return true;
    }
  }

  // Claims and runs indices of the current loop until none is left, then
  // counts them done (one atomic add per worker and loop, not per index).
  void work(int worker) {
    uint64_t v = claim_.load(std::memory_order_acquire);
    uint32_t ran = 0, n_ran = 0;
    for (;;) {
      const PoolChunkFn fn = job_.fn.load(std::memory_order_relaxed);
      void* const ctx = job_.ctx.load(std::memory_order_relaxed);
      const int64_t n = job_.n.load(std::memory_order_relaxed);
      const int limit = job_.limit.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      const int64_t i = int64_t(v & kIndexMask);
      if (i >= n || worker >= limit) break;
      if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      // Every index claimed in this loop belongs to the generation of v: a
      // newer loop is published only after this worker's count below.
      n_ran = uint32_t(n);
      if (!failed_.load(std::memory_order_relaxed)) {
        try {
          fn(ctx, i, worker);
        } catch (...) {
          record_failure(std::current_exception());
        }
      }
      ++ran;
      v = claim_.load(std::memory_order_acquire);
    }
    if (ran == 0) return;
    if (join_.done.fetch_add(ran, std::memory_order_seq_cst) + ran == n_ran &&
        join_.caller_sleeping.load(std::memory_order_seq_cst))
      futex_wake(join_.done, 1);
  }

  // The first exception of a loop is rethrown on the caller; indices not
  // started yet are skipped.
  void record_failure(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    error_ = std::move(e);
    failed_.store(true, std::memory_order_release);
  }

  void helper(int id) {
    in_loop_ = true;
    uint32_t seen = wake_.seq.load(std::memory_order_acquire);
    for (;;) {
      auto idle = [&] { return wake_.seq.load(std::memory_order_acquire) == seen; };
      while (spin_while(idle, kContendedHelperSpinUs)) {
        wake_.sleepers.fetch_add(1, std::memory_order_seq_cst);
        futex_wait(wake_.seq, seen);
        wake_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = wake_.seq.load(std::memory_order_acquire);
      work(id);
    }
  }

  // Written by the caller only, under busy_.
  std::mutex busy_;  // one loop at a time
  int settings_threads_ = 0;
  // Every kLoadSampleEvery, the runnable threads: oversubscribed or not (the caller, under busy_).
  void sample_load() {
    const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
    if (now - last_sample_ < kLoadSampleEvery) return;
    last_sample_ = now;
    const int r = runnable_threads();
    if (r < 0) return;
    runnable_ = runnable_ < 0 ? r : 0.75 * runnable_ + 0.25 * r;
    contended_.store(runnable_ > cpus_ + kOversubscribedBy, std::memory_order_relaxed);
  }

  // The waiting policy (read by the helpers too).
  alignas(kLine) std::atomic<int64_t> spin_us_{0};
  std::atomic<bool> adaptive_{false};
  std::atomic<bool> contended_{false};  // the machine is oversubscribed: spin less
  // The load samples (the caller, under busy_).
  int cpus_ = 1;
  double runnable_ = -1;  // the runnable threads, averaged over the last samples
  std::chrono::steady_clock::time_point last_sample_{};
  int helper_count_ = 0;
  uint64_t generation_ = 0;  // the last loop published
  // Every worker's compare-and-swap target.
  alignas(kLine) std::atomic<uint64_t> claim_{kIndexMask};
  // The loop, written by the caller, read by the workers.
  struct alignas(kLine) Job {
    std::atomic<PoolChunkFn> fn{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<int64_t> n{0};
    std::atomic<int> limit{0};
  } job_;
  // Bumped per loop: what spinning and sleeping helpers wait on.
  struct alignas(kLine) Wake {
    std::atomic<uint32_t> seq{0};
    std::atomic<int> sleepers{0};
  } wake_;
  // Indices finished: what the caller waits on.
  struct alignas(kLine) Join {
    std::atomic<uint32_t> done{0};
    std::atomic<bool> caller_sleeping{false};
  } join_;
  alignas(kLine) std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

thread_local bool WorkPool::in_loop_ = false;

// Never destroyed: the helpers sleep until the process ends (joining them
// from a static destructor at exit hung in tests).
WorkPool& the_pool() {
  static WorkPool* pool = new WorkPool;
  return *pool;
}

// The loop as an OpenMP region (OMP_WAIT_POLICY=PASSIVE, work_pool.h), its
// first exception rethrown after the region as the pool does.
void openmp_run(int64_t n, int threads, PoolChunkFn fn, void* ctx) {
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(static, 1) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      fn(ctx, i, omp_get_thread_num());
    } catch (...) {
#pragma omp critical(zaya_pool_error)
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void pool_run(int64_t n, int threads, PoolChunkFn fn, void* ctx) {
  if (n <= 0) return;
  const bool serial = threads <= 1 || n == 1 || WorkPool::in_loop_ || omp_in_parallel() || n >= int64_t(kIndexMask);
  if (!serial) {
    static const bool passive = pool_wait_settings_from(std::getenv("ZAYA_POOL_SPIN_US"),
                                                        std::getenv("OMP_WAIT_POLICY"), threads, available_cpus())
                                    .openmp_regions;
    if (passive) return openmp_run(n, threads, fn, ctx);
    if (the_pool().try_run(n, threads, fn, ctx)) return;
  }
  for (int64_t i = 0; i < n; ++i) fn(ctx, i, 0);
}

int pool_helpers() { return the_pool().helpers(); }

}  // namespace zaya
