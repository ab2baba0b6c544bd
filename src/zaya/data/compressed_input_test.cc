#include "zaya/data/compressed_input.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<std::string> all_lines(const std::string& path) {
  CompressedLineReader r(path);
  std::vector<std::string> out;
  std::string line;
  while (r.next(line)) out.push_back(line);
  EXPECT_EQ(r.line_number(), out.size());
  return out;
}

TEST(CompressedInput, PlainGzipAndZstdGiveTheSameLines) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "line " + std::to_string(i) + (i % 7 == 0 ? "\r\n" : "\n");
  text += "last line without newline";
  write_file(dir.file("a.txt"), text);
  write_file(dir.file("a.txt.gz"), testing::gzip_bytes(text));
  write_file(dir.file("a.txt.zst"), testing::zstd_bytes(text));
  // Concatenated members / frames are read one after another (pigz, zstd -c a b).
  const size_t half = text.size() / 2;
  write_file(dir.file("two.gz"), testing::gzip_bytes(text.substr(0, half)) + testing::gzip_bytes(text.substr(half)));
  write_file(dir.file("two.zst"), testing::zstd_bytes(text.substr(0, half)) + testing::zstd_bytes(text.substr(half)));
  // Compression is recognised by the magic, not the name.
  write_file(dir.file("named.txt"), testing::zstd_bytes(text));

  EXPECT_EQ(detect_compression(dir.file("a.txt")), Compression::kNone);
  EXPECT_EQ(detect_compression(dir.file("a.txt.gz")), Compression::kGzip);
  EXPECT_EQ(detect_compression(dir.file("a.txt.zst")), Compression::kZstd);
  const std::vector<std::string> plain = all_lines(dir.file("a.txt"));
  ASSERT_EQ(plain.size(), 50001u);
  EXPECT_EQ(plain[0], "line 0");  // "\r" dropped
  EXPECT_EQ(plain.back(), "last line without newline");
  for (const char* f : {"a.txt.gz", "a.txt.zst", "two.gz", "two.zst", "named.txt"})
    EXPECT_EQ(all_lines(dir.file(f)), plain) << f;

  CompressedLineReader r(dir.file("a.txt.zst"));
  std::string line;
  while (r.next(line)) {
  }
  EXPECT_EQ(r.file_bytes_read(), std::filesystem::file_size(dir.file("a.txt.zst")));
}

TEST(CompressedInput, TruncatedOrCorruptDataFailsNamingTheFile) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "some corpus text " + std::to_string(i) + "\n";
  const std::string gz = testing::gzip_bytes(text), zst = testing::zstd_bytes(text);
  write_file(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  write_file(dir.file("cut.zst"), zst.substr(0, zst.size() / 2));
  std::string bad = zst;
  for (size_t i = 20; i < 60; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  write_file(dir.file("bad.zst"), bad);
  testing::expect_data_error([&] { all_lines(dir.file("cut.gz")); }, {"cut.gz", "gzip"});
  testing::expect_data_error([&] { all_lines(dir.file("cut.zst")); }, {"cut.zst", "truncated"});
  testing::expect_data_error([&] { all_lines(dir.file("bad.zst")); }, {"bad.zst", "zstd data is corrupt"});
  testing::expect_data_error([&] { CompressedLineReader r(dir.file("none.txt")); }, {"none.txt", "cannot open corpus"});
}

}  // namespace
}  // namespace zaya
