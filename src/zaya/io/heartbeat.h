#pragma once
// Heartbeats for the supervisor (zaya launch): each rank keeps one small file
// DIR/rank-00000 up to date with its phase, step and time, rewritten in place
// at every phase change and step. A rank stuck anywhere (a dead peer, a hung
// collective, an endless loop) stops beating; the supervisor notices.
//
// Record: "<phase> <step> <unix seconds with fraction>\n", space-padded to 64 bytes.

#include <cstdint>
#include <string>

#include "zaya/io/file_descriptor.h"

namespace zaya {

class Heartbeat {
 public:
  Heartbeat() = default;  // disabled
  Heartbeat(const std::string& dir, int rank);
  void beat(const char* phase, int64_t step);
  bool enabled() const { return file_.is_open(); }

 private:
  FileDescriptor file_;
};

struct HeartbeatRecord {
  std::string phase;
  int64_t step = -1;
  double time = 0;  // unix seconds
};

// Reads DIR/rank-RRRRR; false if missing or malformed.
bool read_heartbeat(const std::string& dir, int rank, HeartbeatRecord& out);
std::string heartbeat_path(const std::string& dir, int rank);

}  // namespace zaya
