#pragma once
// A stop request (docs/fault-tolerance.md, "Preemption"): SIGTERM or SIGINT to
// any rank, or the supervisor's control file OUT_DIR/control/stop. Checked at
// every step boundary and agreed by all ranks, so every rank stops at the same
// step and saves the same checkpoint.

#include <string>

#include "zaya/dist/mesh.h"

namespace zaya {

class StopRequest {
 public:
  StopRequest(std::string out_dir, ProcessMesh& mesh) : out_dir_(std::move(out_dir)), mesh_(mesh) {}
  // Catches SIGTERM and SIGINT from now on (they only set a flag).
  void install();
  // Collective: whether any rank was asked to stop (rank 0 consumes the control file).
  bool requested();

 private:
  std::string out_dir_;
  ProcessMesh& mesh_;
};

}  // namespace zaya
