#include "zaya/data/corpus.h"

#include <gtest/gtest.h>

#include <vector>

#include "zaya/core/error.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<CorpusDocument> read_all(const std::string& path) {
  CorpusReader reader(path);
  std::vector<CorpusDocument> docs;
  CorpusDocument doc;
  while (reader.next(doc)) docs.push_back(doc);
  return docs;
}

TEST(DataCorpus, SplitsOnBlankLines) {
  TempDir dir;
  // Leading blank lines, a whitespace-only separator, several blank lines,
  // CRLF endings and no final newline.
  write_file(dir.file("c.txt"), "\n\nA 1\nline two\n \t\nB\r\nsecond\r\n\n\n\nC\n  indented\n\n");
  auto docs = read_all(dir.file("c.txt"));
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].text, "A 1\nline two");
  EXPECT_EQ(docs[0].first_line, 3u);
  EXPECT_EQ(docs[1].text, "B\nsecond");
  EXPECT_EQ(docs[1].index, 1u);
  EXPECT_EQ(docs[1].first_line, 6u);
  EXPECT_EQ(docs[2].text, "C\n  indented");
  EXPECT_EQ(docs[2].first_line, 11u);

  write_file(dir.file("last.txt"), "only\ndocument");
  docs = read_all(dir.file("last.txt"));
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "only\ndocument");

  write_file(dir.file("empty.txt"), "\n \n");
  EXPECT_TRUE(read_all(dir.file("empty.txt")).empty());
}

TEST(DataCorpus, KjvHasOneDocumentPerChapter) {
  auto docs = read_all(testing::kjv_path());
  ASSERT_EQ(docs.size(), 1189u);  // data/kjv/README.md
  EXPECT_EQ(docs.front().text.substr(0, 10), "Genesis 1\n");
  EXPECT_EQ(docs.back().text.substr(0, 14), "Revelation 22\n");
}

TEST(DataCorpus, Utf8Validation) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);            // never valid
  EXPECT_EQ(find_invalid_utf8("\xc0\x80"), 0u);          // overlong NUL
  EXPECT_EQ(find_invalid_utf8("x\xe0\x80\x80"), 1u);     // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("\xed\xa0\x80"), 0u);      // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("ok\xe2\x98"), 2u);        // truncated sequence
  EXPECT_EQ(find_invalid_utf8("\xe2\x28\xa1"), 0u);      // bad continuation
}

TEST(DataCorpus, InvalidUtf8NamesLineAndColumn) {
  TempDir dir;
  write_file(dir.file("bad.txt"), "fine\n\nalso fine\nbro\xffken\n");
  try {
    read_all(dir.file("bad.txt"));
    FAIL() << "expected zaya::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad.txt: line 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0xff at column 4"), std::string::npos) << msg;
  }
  EXPECT_THROW(CorpusReader(dir.file("missing.txt")), Error);
}

}  // namespace
}  // namespace zaya
