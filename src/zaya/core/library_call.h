#pragma once
// Marks calls into libraries that manage their own heap memory (oneDNN's GEMM
// drivers allocate packing buffers per call). The project's own code must not
// allocate inside the step loop; the test that checks this
// (train/step_numerics_test.cc, TrainJob.StepLoopDoesNotAllocate) counts heap allocations while no library call is in
// progress anywhere in the process.

#include <atomic>

namespace zaya {

inline std::atomic<int> g_library_calls_in_progress{0};

class LibraryCall {
 public:
  LibraryCall() { g_library_calls_in_progress.fetch_add(1, std::memory_order_relaxed); }
  ~LibraryCall() { g_library_calls_in_progress.fetch_sub(1, std::memory_order_relaxed); }
  LibraryCall(const LibraryCall&) = delete;
  LibraryCall& operator=(const LibraryCall&) = delete;
};

}  // namespace zaya
