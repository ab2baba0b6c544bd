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

// A staged file or directory takes the place of whatever is there, in one
// step: nothing, a file, a directory of other files (all of them go), an empty
// directory; the staged path is gone afterwards.
TEST(ReplacePathAtomically, PutsTheStagedPathInPlaceOfAnything) {
  namespace fs = std::filesystem;
  testing::TempDir dir;
  const std::string path = dir.file("out");
  auto stage_file = [&](const std::string& contents) {
    write_file_atomic(dir.file(".staged"), contents);
    return dir.file(".staged");
  };
  auto stage_dir = [&](const std::string& contents) {
    fs::create_directories(dir.file(".staged"));
    write_file_atomic(dir.file(".staged/a"), contents);
    return dir.file(".staged");
  };
  replace_path_atomically(stage_file("one"), path);  // nothing there
  EXPECT_EQ(read_file(path), "one");
  replace_path_atomically(stage_file("two"), path);  // a file by a file
  EXPECT_EQ(read_file(path), "two");
  replace_path_atomically(stage_dir("three"), path);  // a file by a directory
  EXPECT_EQ(read_file(path + "/a"), "three");
  write_file_atomic(path + "/stale", "old");
  replace_path_atomically(stage_dir("four"), path);  // a directory by a directory: the old files go
  EXPECT_EQ(read_file(path + "/a"), "four");
  EXPECT_FALSE(fs::exists(path + "/stale"));
  replace_path_atomically(stage_file("five"), path);  // a directory by a file
  EXPECT_EQ(read_file(path), "five");
  fs::remove(path);
  fs::create_directories(path);
  replace_path_atomically(stage_dir("six"), path);  // an empty directory
  EXPECT_EQ(read_file(path + "/a"), "six");
  EXPECT_FALSE(fs::exists(dir.file(".staged")));
  EXPECT_FALSE(fs::exists(path + ".old"));
  expect_error([&] { replace_path_atomically(dir.file("missing"), path); }, "missing");
  EXPECT_EQ(read_file(path + "/a"), "six");  // a failed replacement leaves the old in place
}

}  // namespace
}  // namespace zaya
