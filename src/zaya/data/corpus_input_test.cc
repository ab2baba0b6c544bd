#include "zaya/data/corpus_input.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::TempDir;
using testing::write_file;

struct Read {
  std::vector<std::string> texts, errors;
};

Read read_all(const CorpusSpec& spec) {
  const std::vector<CorpusFile> files = expand_corpus_inputs(spec);
  CorpusRecordReader reader(files);
  Read out;
  CorpusRecord r;
  while (reader.next(r)) {
    DecodedRecord d = decode_record(std::move(r), files, spec.field);
    (d.ok ? out.texts : out.errors).push_back(d.ok ? d.text : d.error);
  }
  EXPECT_EQ(reader.bytes_read(), reader.bytes_total());
  return out;
}

TEST(CorpusInput, FilesDirectoriesAndGlobsInOrder) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("d/sub"));
  write_file(dir.file("d/b.txt"), "b1\n\nb2\n");
  write_file(dir.file("d/a.txt"), "a1\nline two\n");
  write_file(dir.file("d/sub/c.txt"), "c1\n");
  write_file(dir.file("x1.txt"), "x1\n");
  write_file(dir.file("x2.txt"), "x2\n");
  CorpusSpec spec;
  spec.inputs = {dir.file("x2.txt"), dir.file("d"), dir.file("x*.txt")};
  const std::vector<CorpusFile> files = expand_corpus_inputs(spec);
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(std::filesystem::relative(f.path, dir.path()).string());
  EXPECT_EQ(names, (std::vector<std::string>{"x2.txt", "d/a.txt", "d/b.txt", "d/sub/c.txt", "x1.txt", "x2.txt"}));
  EXPECT_EQ(read_all(spec).texts, (std::vector<std::string>{"x2", "a1\nline two", "b1", "b2", "c1", "x1", "x2"}));

  spec.inputs = {dir.file("nothing*.txt")};
  testing::expect_data_error([&] { expand_corpus_inputs(spec); }, {"nothing*.txt", "matches no file"});
  spec.inputs = {dir.file("missing.txt")};
  testing::expect_data_error([&] { expand_corpus_inputs(spec); }, {"missing.txt", "cannot open corpus"});
  std::filesystem::create_directories(dir.file("empty"));
  spec.inputs = {dir.file("empty")};
  testing::expect_data_error([&] { expand_corpus_inputs(spec); }, {"empty", "holds no files"});
  spec.inputs = {dir.file("x1.txt")};
  spec.field = "a..b";
  testing::expect_data_error([&] { expand_corpus_inputs(spec); }, {"field 'a..b'", "dotted path"});
}

TEST(CorpusInput, JsonlFieldsAndCompressionByAutoFormat) {
  TempDir dir;
  const std::string jsonl =
      "{\"text\": \"first\\ndoc\", \"meta\": {\"body\": \"m1\"}}\n"
      "\n"
      "{\"text\": \"caf\\u00e9 \\ud83d\\ude00\", \"meta\": {\"body\": \"m2\"}}\r\n";
  write_file(dir.file("a.jsonl"), jsonl);
  write_file(dir.file("b.jsonl.gz"), testing::gzip_bytes(jsonl));
  write_file(dir.file("c.json.zst"), testing::zstd_bytes(jsonl));
  CorpusSpec spec;
  spec.inputs = {dir.file("a.jsonl"), dir.file("b.jsonl.gz"), dir.file("c.json.zst")};
  for (const auto& f : expand_corpus_inputs(spec)) EXPECT_EQ(f.format, CorpusFormat::kJsonl) << f.path;
  const std::vector<std::string> one = {"first\ndoc", "caf\xc3\xa9 \xf0\x9f\x98\x80"};
  Read r = read_all(spec);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.texts, (std::vector<std::string>{one[0], one[1], one[0], one[1], one[0], one[1]}));
  spec.field = "meta.body";
  EXPECT_EQ(read_all(spec).texts, (std::vector<std::string>{"m1", "m2", "m1", "m2", "m1", "m2"}));

  // A forced format overrides the name: the JSONL lines read as one text document.
  spec.inputs = {dir.file("a.jsonl")};
  spec.format = CorpusFormat::kText;
  EXPECT_EQ(read_all(spec).texts.size(), 2u);
  EXPECT_EQ(parse_corpus_format("jsonl"), CorpusFormat::kJsonl);
  testing::expect_data_error([] { parse_corpus_format("csv"); }, {"'csv'", "'auto', 'text' or 'jsonl'"});
}

TEST(CorpusInput, BadRecordsNameFileLineAndReason) {
  TempDir dir;
  write_file(dir.file("bad.jsonl"),
             "{\"text\": \"ok\"}\n"
             "{\"text\": \"unterminated\n"
             "{\"body\": \"no text\"}\n"
             "{\"text\": 42}\n"
             "[1, 2]\n"
             "{\"text\": \"bad \xff byte\"}\n"
             "{\"meta\": 3, \"text\": \"ok again\"}\n");
  CorpusSpec spec;
  spec.inputs = {dir.file("bad.jsonl")};
  Read r = read_all(spec);
  EXPECT_EQ(r.texts, (std::vector<std::string>{"ok", "ok again"}));
  ASSERT_EQ(r.errors.size(), 5u);
  const std::string f = dir.file("bad.jsonl");
  EXPECT_NE(r.errors[0].find(f + ": line 2: invalid JSON"), std::string::npos) << r.errors[0];
  EXPECT_NE(r.errors[1].find(f + ": line 3: field 'text' not found"), std::string::npos) << r.errors[1];
  EXPECT_NE(r.errors[2].find(f + ": line 4: field 'text' is a JSON number, expected a string"), std::string::npos)
      << r.errors[2];
  EXPECT_NE(r.errors[3].find(f + ": line 5: field 'text' not found"), std::string::npos) << r.errors[3];
  EXPECT_NE(r.errors[4].find(f + ": line 6: invalid UTF-8 (byte 0xff at column 15)"), std::string::npos) << r.errors[4];
  spec.field = "meta.x";
  r = read_all(spec);
  EXPECT_NE(r.errors.back().find("line 7: field 'meta.x' not found: 'meta' is a JSON number, not an object"),
            std::string::npos)
      << r.errors.back();

  // Text documents: the line and column inside a multi-line document.
  write_file(dir.file("bad.txt"), "doc one\n\nline a\nline \xc3\x28 b\n");
  spec.inputs = {dir.file("bad.txt")};
  r = read_all(spec);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("bad.txt: line 4: invalid UTF-8 (byte 0xc3 at column 6)"), std::string::npos)
      << r.errors[0];
}

}  // namespace
}  // namespace zaya
