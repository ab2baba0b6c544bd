#pragma once
#include "zaya/dist/comm.h"

namespace zaya::testing {
// The world communicator of the running multi-process test.
extern Comm* g_world;
inline Comm& world() { return *g_world; }
}  // namespace zaya::testing
