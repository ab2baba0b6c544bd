#pragma once
// Fault injection, so that tests can make a chosen rank fail at a chosen
// point and check that the run reacts as promised (clear errors, no hangs).
// Faults are planned in the environment:
//   ZAYA_FAULT="startup:rank=1"          the trainer's start-up fails on rank 1
//   ZAYA_FAULT="step:rank=0,step=3"      step 3 throws on rank 0
// Several faults are separated by ';'. A field left out matches anything.

#include <cstdint>
#include <string>

namespace zaya {

// True if the environment plans a fault of `kind` for this rank and step.
bool fault_planned(const std::string& kind, int rank, int64_t step = -1);

}  // namespace zaya
