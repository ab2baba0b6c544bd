// MPI's initialisation and finalisation in this process, and its abort
// (dist/mpi_runtime.h).
#include "zaya/dist/mpi_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/dist/comm.h"

namespace zaya {
namespace mpi {
namespace {

// A collective past its deadline: the rank says which one, and ends. Its
// exit without MPI_Finalize makes the launcher (mpirun, mpiexec, srun) stop
// every other rank; no MPI call is made here, as another thread is inside MPI.
void collective_timed_out(const std::string& message) {
  std::fflush(stdout);
  fmt::print(stderr, "error: {}\n", message);
  std::fflush(stderr);
  std::_Exit(kExitFailure);
}

}  // namespace

MpiRuntime::MpiRuntime() : watchdog(collective_timed_out) {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // The caller's thread and the communication thread call MPI, never at
    // the same time (background threads write checkpoints, never communicate).
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      fail("MPI_Init_thread failed");
    owned = true;
  } else {
    MPI_Query_thread(&provided);
  }
  // Without SERIALIZED, non-blocking operations run to completion when they are started.
  threaded = provided >= MPI_THREAD_SERIALIZED;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiRuntime::~MpiRuntime() {
  worker.reset();  // finishes what was posted, before MPI goes away
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned && !finalized) MPI_Finalize();
}

MpiRuntime& runtime() {
  static MpiRuntime r;
  return r;
}

}  // namespace mpi

void abort_world(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace zaya
