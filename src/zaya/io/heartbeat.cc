#include "zaya/io/heartbeat.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "zaya/core/error.h"

namespace zaya {

std::string heartbeat_path(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / fmt::format("rank-{:05}", rank)).string();
}

Heartbeat::Heartbeat(const std::string& dir, int rank) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZAYA_CHECK(!ec, "cannot create the heartbeat directory {}: {}", dir, ec.message());
  file_ = FileDescriptor::create(heartbeat_path(dir, rank));
}

void Heartbeat::beat(HeartbeatPhase phase, int64_t step) {
  if (!file_.is_open()) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char record[64];
  int n = std::snprintf(record, sizeof(record), "%s %lld %.3f", enum_name<HeartbeatPhase>(kHeartbeatPhaseNames, phase),
                        static_cast<long long>(step), now);
  if (n < 0 || n > 62) n = 62;
  for (int i = n; i < 63; ++i) record[i] = ' ';
  record[63] = '\n';
  // One pwrite of a fixed-size record: readers never see a torn line of another length.
  if (::pwrite(file_.get(), record, sizeof(record), 0) != ssize_t(sizeof(record))) {
    // Losing a heartbeat is not worth stopping training for; the supervisor
    // will see a stale file and act on that.
  }
}

bool read_heartbeat(const std::string& dir, int rank, HeartbeatRecord& out) {
  std::ifstream in(heartbeat_path(dir, rank));
  if (!in) return false;
  std::string phase;
  long long step = -1;
  double time = 0;
  if (!(in >> phase >> step >> time)) return false;
  const HeartbeatPhase* p = enum_find<HeartbeatPhase>(kHeartbeatPhaseNames, phase);
  if (p == nullptr) return false;
  out = {*p, step, time};
  return true;
}

}  // namespace zaya
