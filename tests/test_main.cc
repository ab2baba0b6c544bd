#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "zaya/core/library_call.h"
#include "zaya/core/test_util.h"

// Counts the C++ heap allocations of the test process made outside library
// calls (core/library_call.h), so tests can check that the project's own code
// allocates nothing on a path (testing::allocation_count in core/test_util.h).
namespace {
std::atomic<long> g_allocations{0};
}

long zaya::testing::allocation_count() { return g_allocations.load(); }

void count_allocation() {
  if (zaya::g_library_calls_in_progress.load(std::memory_order_relaxed) == 0)
    g_allocations.fetch_add(1, std::memory_order_relaxed);
}

void* operator new(std::size_t n) {
  count_allocation();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  count_allocation();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): every
// new/delete pair must go through the same allocator, or ASan reports a mismatch.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  count_allocation();
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  count_allocation();
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
