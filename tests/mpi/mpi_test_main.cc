// Test driver for the multi-process tests: every rank runs the same GoogleTest
// program under mpirun; only rank 0 prints, and the process exits non-zero on
// any rank's failure (mpirun then fails too).
#include <gtest/gtest.h>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/dist/comm.h"

namespace zaya::testing {
Comm* g_world = nullptr;
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = zaya::make_world_comm();
  zaya::testing::g_world = world.get();
  if (world->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  int failed = rc != 0, any = 0;
  world->all_reduce(&failed, &any, 1, zaya::DType::kI32, zaya::ReduceOp::kMax);
  if (any && world->rank() == 0 && rc == 0) std::fprintf(stderr, "a test failed on another rank\n");
  return any;
}
