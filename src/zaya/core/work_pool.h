#pragma once
// A fixed team of helper threads for the many short parallel loops of a decode
// step (docs/performance.md, "Decoding": one OpenMP region per product cost a
// fork and a join barrier each, tens per step, and a barrier waits for every
// team thread, even one the scheduler has not run yet).
//
// pool_for(n, threads, f) runs f(i, worker) for every i in [0, n) on the
// calling thread (worker 0) and up to threads - 1 helper threads (workers
// 1..threads-1), each claiming the next index from a shared counter. The
// caller waits only for the indices that were claimed: a helper that is not
// running when the loop starts simply takes none, so a busy machine slows a
// loop down, never stalls it. Which worker runs an index changes from run to
// run, so f must give each index's result independently of the worker (each
// index its own output rows; `worker` only picks scratch), which keeps results
// bitwise identical at any thread count.
//
// The loop runs serially on the calling thread (worker 0) when threads <= 1,
// n <= 1, inside an OpenMP region, inside another pool_for (on a helper, or
// on the caller within its own loop: no nesting), or while another thread's
// loop holds the pool. If f throws, indices not started yet are skipped and
// the first exception is rethrown on the caller once every started index has
// finished. Nothing is allocated per loop; the words the workers write (the
// claim, the done count, the wake word) sit on cache lines of their own.
//
// Waiting (docs/performance.md, "The work pool's waiting"): after a loop a
// helper spins on the wake word, then sleeps on a futex; the caller, its own
// indices done, spins on the done count, then sleeps. By default the spin
// lasts 1,000 us (libgomp's team spins about as long), but only 50 us
// (helpers) and 20 us (the caller) while the machine is oversubscribed (the
// kernel's runnable threads, /proc/loadavg sampled every 50 ms, above the
// CPUs this process may use plus 1.5), and 20 us when the threads outnumber
// those CPUs. ZAYA_POOL_SPIN_US=N fixes it at N microseconds (0: sleep at
// once); OMP_WAIT_POLICY=ACTIVE at 1 s. With OMP_WAIT_POLICY=PASSIVE (and
// ZAYA_POOL_SPIN_US unset) the loop is an OpenMP region instead (index i on
// thread i mod threads, the threads sleeping between regions): on the shared
// 2-core machine that policy measured faster with libgomp's team than with
// sleeping helpers.

#include <cstdint>
#include <type_traits>

namespace zaya {

using PoolChunkFn = void (*)(void* ctx, int64_t index, int worker);

// The type-erased form of pool_for.
void pool_run(int64_t n, int threads, PoolChunkFn fn, void* ctx);

template <typename F>
void pool_for(int64_t n, int threads, F&& f) {
  using Fn = std::remove_reference_t<F>;
  pool_run(
      n, threads, [](void* ctx, int64_t i, int worker) { (*static_cast<Fn*>(ctx))(i, worker); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// Helper threads started so far (tests).
int pool_helpers();

// The waiting policy (above) for `threads` workers on `cpus` CPUs, from the
// values of ZAYA_POOL_SPIN_US and OMP_WAIT_POLICY (null: unset). Throws
// zaya::Error naming the variable for a ZAYA_POOL_SPIN_US that is not a whole
// number in [0, 1000000].
struct PoolWaitSettings {
  int64_t spin_us = 0;          // how long a waiting worker spins before it sleeps
  bool adaptive = false;        // spin 50 us (helpers) / 20 us (the caller) while oversubscribed
  bool openmp_regions = false;  // OMP_WAIT_POLICY=PASSIVE: loops are OpenMP regions
};
PoolWaitSettings pool_wait_settings_from(const char* spin_us, const char* omp_wait_policy, int threads, int cpus);

}  // namespace zaya
