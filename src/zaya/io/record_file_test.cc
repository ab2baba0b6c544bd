// Whole records only, whatever the disk does.
#include "zaya/io/record_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

TEST(RecordFile, AppendsWholeRecordsAndDropsWhatDoesNotFit) {
  testing::TempDir dir;
  const std::string path = dir.file("m.jsonl");
  {
    RecordFile f(path, true);
    EXPECT_TRUE(f.append(R"({"step":1})"));
  }
  {
    RecordFile f(path, false);  // appends to what is there
    EXPECT_TRUE(f.append(R"({"step":2})"));
    // A file-size limit below the next record: the write is short or fails, the file keeps whole records.
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit old {};
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = old;
    small.rlim_cur = 30;  // 22 bytes are there; a 20-byte record crosses the limit
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    const bool ok = f.append(R"({"step":3,"x":12})");
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, SIG_DFL);
    EXPECT_FALSE(ok);
    EXPECT_EQ(f.dropped(), 1);
    EXPECT_FALSE(f.last_error().empty());
    EXPECT_TRUE(f.append(R"({"step":4})"));  // room again: on it goes
  }
  EXPECT_EQ(testing::read_file(path), "{\"step\":1}\n{\"step\":2}\n{\"step\":4}\n");
}

TEST(RecordFile, TornLinesAreDroppedOnRead) {
  int64_t torn = -1;
  EXPECT_EQ(whole_json_lines("{\"a\":1}\n{\"b\":2}{\"c\"\n\n{\"d\":4}\n{\"e\":", &torn), "{\"a\":1}\n{\"d\":4}\n");
  EXPECT_EQ(torn, 2);
  EXPECT_EQ(whole_json_lines("", &torn), "");
  EXPECT_EQ(torn, 0);
}

}  // namespace
}  // namespace zaya
