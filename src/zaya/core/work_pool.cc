#include "zaya/core/work_pool.h"

#include <linux/futex.h>
#include <omp.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

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

bool wait_policy_is(const char* name) {
  const char* p = std::getenv("OMP_WAIT_POLICY");
  return p != nullptr && strcasecmp(p, name) == 0;
}

// How long a helper spins for the next loop before it sleeps.
std::chrono::microseconds spin_time() { return std::chrono::microseconds(wait_policy_is("active") ? 20000 : 50); }

constexpr uint64_t kIndexMask = 0xFFFFFFFFull;
// How long the caller spins for the helpers' last indices before it sleeps.
constexpr std::chrono::microseconds kCallerSpin(20);

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
    for (int have = helper_count_.load(std::memory_order_relaxed); have < threads - 1; ++have) {
      const int id = have + 1;
      std::thread([this, id] { helper(id); }).detach();
      helper_count_.store(id, std::memory_order_relaxed);
    }
    const uint64_t g = ++generation_;
    claim_.store((g << 32) | kIndexMask, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    n_.store(n, std::memory_order_relaxed);
    limit_.store(threads, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    claim_.store(g << 32, std::memory_order_release);
    seq_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake(seq_, threads - 1);
    work(0);
    // The indices helpers hold: they take microseconds, unless the helper was
    // descheduled; then sleep (a spinning or yielding caller would lose its
    // share of a busy machine to the other processes and run late itself).
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; done_.load(std::memory_order_acquire) < uint32_t(n); ++k) {
      if (k > 0) cpu_relax();
      if (k % 64 == 0 && std::chrono::steady_clock::now() - t0 >= caller_spin_) {
        caller_sleeping_.store(true, std::memory_order_seq_cst);
        for (uint32_t d; (d = done_.load(std::memory_order_seq_cst)) < uint32_t(n);) futex_wait(done_, d);
        caller_sleeping_.store(false, std::memory_order_relaxed);
      }
    }
    return true;
  }

  int helpers() const { return helper_count_.load(std::memory_order_relaxed); }

 private:
  // Claims and runs indices of the current loop until none is left.
  void work(int worker) {
    uint64_t v = claim_.load(std::memory_order_acquire);
    for (;;) {
      const PoolChunkFn fn = fn_.load(std::memory_order_relaxed);
      void* const ctx = ctx_.load(std::memory_order_relaxed);
      const int64_t n = n_.load(std::memory_order_relaxed);
      const int limit = limit_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      const int64_t i = int64_t(v & kIndexMask);
      if (i >= n || worker >= limit) return;
      if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      fn(ctx, i, worker);
      if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == uint32_t(n) &&
          caller_sleeping_.load(std::memory_order_seq_cst))
        futex_wake(done_, 1);
      v = claim_.load(std::memory_order_acquire);
    }
  }

  void helper(int id) {
    on_helper_ = true;
    const auto spin = spin_time_;
    uint32_t seen = seq_.load(std::memory_order_acquire);
    for (;;) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; seq_.load(std::memory_order_acquire) == seen; ++k) {
        if (k > 0) cpu_relax();
        if (k % 256 == 0 && std::chrono::steady_clock::now() - t0 >= spin) {
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          futex_wait(seq_, seen);
          sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        }
      }
      seen = seq_.load(std::memory_order_acquire);
      work(id);
    }
  }

 public:
  static thread_local bool on_helper_;

 private:
  const std::chrono::microseconds spin_time_ = spin_time();
  // The caller spins as long as the helpers, at most kCallerSpin.
  const std::chrono::microseconds caller_spin_ = std::min(spin_time_, kCallerSpin);
  std::mutex busy_;  // one loop at a time
  std::atomic<int> helper_count_{0};
  uint64_t generation_ = 0;  // the last loop published (under busy_)
  std::atomic<uint64_t> claim_{kIndexMask};
  std::atomic<PoolChunkFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int> limit_{0};
  std::atomic<uint32_t> done_{0};  // indices finished (what a sleeping caller waits on)
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<uint32_t> seq_{0};  // bumped per loop: what sleeping helpers wait on
  std::atomic<int> sleepers_{0};
};

thread_local bool WorkPool::on_helper_ = false;

// Never destroyed: the helpers sleep until the process ends (joining them
// from a static destructor at exit hung in tests).
WorkPool& the_pool() {
  static WorkPool* pool = new WorkPool;
  return *pool;
}

}  // namespace

void pool_run(int64_t n, int threads, PoolChunkFn fn, void* ctx) {
  if (n <= 0) return;
  const bool serial = threads <= 1 || n == 1 || WorkPool::on_helper_ || omp_in_parallel() || n >= int64_t(kIndexMask);
  static const bool passive = wait_policy_is("passive");
  if (!serial && passive) {
    // libgomp's sleeping team, index i on thread i mod threads (see work_pool.h).
#pragma omp parallel for schedule(static, 1) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) fn(ctx, i, omp_get_thread_num());
    return;
  }
  if (serial || !the_pool().try_run(n, threads, fn, ctx))
    for (int64_t i = 0; i < n; ++i) fn(ctx, i, 0);
}

int pool_helpers() { return the_pool().helpers(); }

}  // namespace zaya
