// Heartbeat records (io/heartbeat.h): the phase is written by name and read back as the enum; a record whose phase
// the supervisor does not know is malformed, not a phase with the setup timeout.

#include "zaya/io/heartbeat.h"

#include <gtest/gtest.h>

#include <fstream>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

TEST(Heartbeat, EveryPhaseRoundTripsByName) {
  testing::TempDir dir;
  Heartbeat hb(dir.path(), 3);
  for (const EnumName<HeartbeatPhase>& p : kHeartbeatPhaseNames) {
    hb.beat(p.value, 41);
    HeartbeatRecord r;
    ASSERT_TRUE(read_heartbeat(dir.path(), 3, r)) << p.name;
    EXPECT_EQ(r.phase, p.value) << p.name;
    EXPECT_EQ(r.step, 41);
    std::ifstream in(heartbeat_path(dir.path(), 3));
    std::string word;
    in >> word;
    EXPECT_EQ(word, p.name);  // the file format the supervisor of another build reads
  }
}

TEST(Heartbeat, UnknownPhaseIsMalformed) {
  testing::TempDir dir;
  std::ofstream(heartbeat_path(dir.path(), 0)) << "compiling 7 1700000000.000\n";
  HeartbeatRecord r;
  EXPECT_FALSE(read_heartbeat(dir.path(), 0, r));
  std::ofstream(heartbeat_path(dir.path(), 0)) << "eval 7 1700000000.000\n";
  ASSERT_TRUE(read_heartbeat(dir.path(), 0, r));
  EXPECT_EQ(r.phase, HeartbeatPhase::kEval);
}

}  // namespace
}  // namespace zaya
