#pragma once
// Heartbeats for the supervisor (zaya launch): each rank keeps one small file
// DIR/rank-00000 up to date with its phase, step and time, rewritten in place
// at every phase change and step. A rank stuck anywhere (a dead peer, a hung
// collective, an endless loop) stops beating; the supervisor notices.
//
// Record: "<phase> <step> <unix seconds with fraction>\n", space-padded to 64 bytes.

#include <cstdint>
#include <string>

#include "zaya/core/enum_names.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {

// Where a rank is; the supervisor gives each phase its own timeout (launch/supervisor.h).
enum class HeartbeatPhase { kSetup, kStep, kCheckpoint, kEval, kFinishing };
inline constexpr EnumName<HeartbeatPhase> kHeartbeatPhaseNames[] = {{HeartbeatPhase::kSetup, "setup"},
                                                                    {HeartbeatPhase::kStep, "step"},
                                                                    {HeartbeatPhase::kCheckpoint, "checkpoint"},
                                                                    {HeartbeatPhase::kEval, "eval"},
                                                                    {HeartbeatPhase::kFinishing, "finishing"}};

class Heartbeat {
 public:
  Heartbeat() = default;  // disabled
  Heartbeat(const std::string& dir, int rank);
  void beat(HeartbeatPhase phase, int64_t step);
  bool enabled() const { return file_.is_open(); }

 private:
  FileDescriptor file_;
};

struct HeartbeatRecord {
  HeartbeatPhase phase = HeartbeatPhase::kSetup;
  int64_t step = -1;
  double time = 0;  // unix seconds
};

// Reads DIR/rank-RRRRR; false if missing or malformed (an unknown phase included).
bool read_heartbeat(const std::string& dir, int rank, HeartbeatRecord& out);
std::string heartbeat_path(const std::string& dir, int rank);

}  // namespace zaya
