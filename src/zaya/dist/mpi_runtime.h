#pragma once
// The MPI process state shared by the files that call MPI (dist/mpi_*.cc, the
// only ones that include mpi.h; CMakeLists.txt builds them once per MPI
// implementation): initialisation, the watchdog and the communication thread.
#include <mpi.h>

#include <memory>

#include "zaya/dist/comm_watchdog.h"
#include "zaya/dist/comm_worker.h"

namespace zaya::mpi {

// MPI is initialised on first use and finalised when the process exits.
struct MpiRuntime {
  MpiRuntime();
  ~MpiRuntime();
  bool owned = false, threaded = false;
  CommWatchdog watchdog;
  std::unique_ptr<CommWorker> worker = std::make_unique<CommWorker>();
};

MpiRuntime& runtime();

}  // namespace zaya::mpi
