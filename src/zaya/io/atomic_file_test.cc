#include "zaya/io/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;
using testing::read_file;

TEST(AtomicFileWriter, CommitReplacesTheFile) {
  testing::TempDir dir;
  const std::string path = dir.file("out.bin");
  write_file_atomic(path, "old");
  {
    AtomicFileWriter out(path);
    out.write("new ");
    std::string big(3 << 20, 'x');  // larger than the internal buffer: written directly
    out.write(big.data(), big.size());
    out.write("tail");
    EXPECT_EQ(read_file(path), "old");  // nothing visible before commit
    EXPECT_EQ(out.size(), 4 + big.size() + 4);
    out.commit();
  }
  std::string content = read_file(path);
  EXPECT_EQ(content.size(), 4 + (3u << 20) + 4);
  EXPECT_EQ(content.substr(0, 4), "new ");
  EXPECT_EQ(content.substr(content.size() - 4), "tail");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(AtomicFileWriter, AbandonedWriteLeavesTheOldFile) {
  testing::TempDir dir;
  const std::string path = dir.file("out.bin");
  write_file_atomic(path, "old");
  {
    AtomicFileWriter out(path);
    out.write("half-written");
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
  }  // destroyed without commit, as when an exception unwinds
  EXPECT_EQ(read_file(path), "old");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(AtomicFileWriter, ReportsUnwritablePaths) {
  testing::TempDir dir;
  expect_error([&] { write_file_atomic(dir.file("missing/out.bin"), "x"); }, "missing/out.bin.tmp: cannot create");
}

}  // namespace
}  // namespace zaya
