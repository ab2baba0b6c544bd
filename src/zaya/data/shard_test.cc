#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/data/shard_format.h"
#include "zaya/data/shard_reader.h"
#include "zaya/data/shard_writer.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

constexpr uint32_t kVocab = 262144;  // Gemma's: ids above 65535 need 4 bytes

std::vector<std::vector<int32_t>> random_documents(int n, uint64_t seed) {
  Rng rng{seed, 0, 0};
  std::vector<std::vector<int32_t>> docs(n);
  for (int d = 0; d < n; ++d) {
    docs[d].resize(rng.next_below(50));  // includes empty documents
    for (auto& t : docs[d]) t = static_cast<int32_t>(rng.next_below(kVocab));
  }
  return docs;
}

std::string write_shard(const TempDir& dir, const std::vector<std::vector<int32_t>>& docs) {
  std::string prefix = dir.file("tokens");
  ShardWriter w(prefix, kVocab);
  for (const auto& d : docs) w.add_document(d);
  w.finish();
  return prefix;
}

// Expects ShardReader::open(prefix) to throw a zaya::Error containing every part.
void expect_open_error(const std::string& prefix, std::initializer_list<std::string> parts,
                       ShardReadOptions options = {}) {
  try {
    ShardReader::open(prefix, options);
    ADD_FAILURE() << "expected zaya::Error for " << prefix;
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// Overwrites `bytes.size()` bytes of `path` at `offset`.
void patch(const std::string& path, size_t offset, const void* bytes, size_t n) {
  std::string s = read_file(path);
  ASSERT_LE(offset + n, s.size());
  std::memcpy(s.data() + offset, bytes, n);
  write_file(path, s);
}

TEST(Shard, WriteReadRoundTrip) {
  TempDir dir;
  auto docs = random_documents(200, 1);
  docs[3].clear();
  std::string prefix = dir.file("tokens");
  ShardWriter w(prefix, kVocab);
  for (const auto& d : docs) w.add_document(d);
  ShardWriteSummary s = w.finish();
  EXPECT_EQ(s.num_documents, 200u);
  EXPECT_FALSE(std::filesystem::exists(prefix + ".bin.tmp"));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".idx.tmp"));

  ShardReader r = ShardReader::open(prefix, {ChecksumMode::kAlways, true});
  EXPECT_EQ(r.vocab_size(), kVocab);
  EXPECT_EQ(r.num_documents(), 200u);
  EXPECT_EQ(r.num_tokens(), s.num_tokens);
  EXPECT_EQ(r.checksum(), s.bin_xxh64);
  EXPECT_EQ(std::filesystem::file_size(prefix + ".bin"), 4 * s.num_tokens);
  EXPECT_EQ(std::filesystem::file_size(prefix + ".idx"), 40 + 8 * 201u);
  uint64_t pos = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    auto got = r.document(d);
    ASSERT_EQ(got.size(), docs[d].size()) << "document " << d;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], static_cast<uint32_t>(docs[d][i]));
      EXPECT_EQ(r.tokens()[pos + i], got[i]);
    }
    pos += got.size();
  }
  EXPECT_THROW(r.document(200), Error);

  // Moving keeps the mapping valid.
  ShardReader moved = std::move(r);
  EXPECT_EQ(moved.document(1).size(), docs[1].size());
}

TEST(Shard, EmptyShardAndOverwrite) {
  TempDir dir;
  std::string prefix = write_shard(dir, {});
  ShardReader r = ShardReader::open(prefix);
  EXPECT_EQ(r.num_documents(), 0u);
  EXPECT_EQ(r.num_tokens(), 0u);
  // Writing again replaces the shard as a whole.
  write_shard(dir, random_documents(5, 2));
  EXPECT_EQ(ShardReader::open(prefix).num_documents(), 5u);
}

TEST(Shard, WriterRejectsBadIdsAndCleansUp) {
  TempDir dir;
  {
    ShardWriter w(dir.file("x"), 100);
    std::vector<int32_t> bad = {1, 2, 100};
    try {
      w.add_document(bad);
      ADD_FAILURE() << "expected zaya::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("document 0 token 2 is 100, outside the vocabulary [0, 100)"),
                std::string::npos)
          << e.what();
    }
    std::vector<int32_t> negative = {-5};
    EXPECT_THROW(w.add_document(negative), Error);
    EXPECT_TRUE(std::filesystem::exists(dir.file("x.bin.tmp")));
  }  // never finished: the temporary file goes away, no shard appears
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.bin.tmp")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.bin")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.idx")));
  EXPECT_THROW(ShardWriter(dir.file("y"), 0), Error);
}

TEST(Shard, MissingFiles) {
  TempDir dir;
  expect_open_error(dir.file("none"), {"none.idx", "cannot open"});
  std::string prefix = write_shard(dir, random_documents(3, 3));
  std::filesystem::remove(prefix + ".bin");
  expect_open_error(prefix, {"tokens.bin", "cannot open"});
}

TEST(Shard, TruncatedIndexIsAnError) {
  TempDir dir;
  std::string prefix = write_shard(dir, random_documents(10, 4));
  const std::string idx = read_file(prefix + ".idx");
  for (size_t len : {size_t{0}, size_t{7}, size_t{39}}) {
    write_file(prefix + ".idx", idx.substr(0, len));
    expect_open_error(prefix, {"tokens.idx", "shorter than the 40-byte header"});
  }
  for (size_t len : {size_t{40}, size_t{48}, idx.size() - 8, idx.size() - 1}) {
    write_file(prefix + ".idx", idx.substr(0, len));
    expect_open_error(prefix, {"tokens.idx", "number of documents is 10"});
  }
  write_file(prefix + ".idx", idx + std::string(8, '\0'));  // trailing garbage
  expect_open_error(prefix, {"tokens.idx", "number of documents is 10"});
}

TEST(Shard, TruncatedTokensAreAnError) {
  TempDir dir;
  std::string prefix = write_shard(dir, random_documents(10, 5));
  const std::string bin = read_file(prefix + ".bin");
  for (size_t len : {size_t{0}, size_t{3}, bin.size() - 4, bin.size() - 1}) {
    write_file(prefix + ".bin", bin.substr(0, len));
    expect_open_error(prefix, {"tokens.bin", fmt::format("file is {} bytes", len), "tokens.idx records"});
  }
}

TEST(Shard, CorruptHeaderFields) {
  TempDir dir;
  std::string prefix = write_shard(dir, random_documents(20, 6));
  const std::string idx_path = prefix + ".idx", good = read_file(idx_path);
  auto restore = [&] { write_file(idx_path, good); };

  patch(idx_path, 0, "ZAYAIDX9", 8);
  expect_open_error(prefix, {"tokens.idx", "magic is 'ZAYAIDX9'", "expected 'ZAYAIDX1'"});
  restore();
  uint32_t version = 2;
  patch(idx_path, 8, &version, 4);
  expect_open_error(prefix, {"tokens.idx", "format version 2 is not supported"});
  restore();
  uint32_t vocab = 0;
  patch(idx_path, 12, &vocab, 4);
  expect_open_error(prefix, {"tokens.idx", "vocab size 0"});
  restore();
  uint64_t docs = UINT64_MAX;  // would overflow a naive size computation
  patch(idx_path, 16, &docs, 8);
  expect_open_error(prefix, {"tokens.idx", "number of documents is 18446744073709551615"});
  restore();
  uint64_t tokens = 7;
  patch(idx_path, 24, &tokens, 8);
  expect_open_error(prefix, {"tokens.idx", "last document offset", "token count is 7"});
  restore();
  ShardReader::open(prefix, {ChecksumMode::kAlways, true});  // intact again
}

TEST(Shard, CorruptOffsets) {
  TempDir dir;
  std::string prefix = write_shard(dir, random_documents(20, 7));
  const std::string idx_path = prefix + ".idx", good = read_file(idx_path);
  ShardReader r = ShardReader::open(prefix);
  const uint64_t o16 = r.offsets()[16];

  uint64_t value = o16 - 1;  // offset 17 below offset 16 (offsets of this shard are distinct enough)
  ASSERT_GT(o16, 0u);
  patch(idx_path, 40 + 8 * 17, &value, 8);
  expect_open_error(prefix,
                    {fmt::format("tokens.idx: document offset 17 ({}) is smaller than offset 16 ({})", value, o16)});
  write_file(idx_path, good);
  value = 3;
  patch(idx_path, 40, &value, 8);
  expect_open_error(prefix, {"tokens.idx: document offset 0 is 3, expected 0"});
  write_file(idx_path, good);
  value = r.num_tokens() + 1;
  patch(idx_path, 40 + 8 * 20, &value, 8);
  expect_open_error(prefix, {"tokens.idx", "last document offset (offset 20)"});
}

TEST(Shard, ChecksumAndTokenIdChecks) {
  TempDir dir;
  std::string prefix = write_shard(dir, random_documents(30, 8));
  const std::string bin_path = prefix + ".bin";
  uint32_t huge = kVocab + 5;
  patch(bin_path, 4 * 10, &huge, 4);
  expect_open_error(prefix, {"tokens.bin", "xxh64 checksum", "tokens.idx records"});
  expect_open_error(prefix, {"tokens.bin", "xxh64 checksum"}, {ChecksumMode::kAlways, false});
  // Trusting the checksum still catches the bad id when asked to check ids.
  expect_open_error(prefix, {"tokens.bin: token 10 is 262149, not below the vocab size 262144"},
                    {ChecksumMode::kNever, true});
  ShardReader r = ShardReader::open(prefix, {ChecksumMode::kNever, false});
  EXPECT_THROW(r.verify_checksum(), Error);
  EXPECT_THROW(r.check_token_ids(), Error);
}

TEST(Shard, GarbageFilesNeverCrash) {
  TempDir dir;
  std::string prefix = dir.file("junk");
  Rng rng{9, 0, 0};
  for (int trial = 0; trial < 50; ++trial) {
    std::string idx(rng.next_below(200), '\0'), bin(rng.next_below(200), '\0');
    for (auto& c : idx) c = static_cast<char>(rng.next_u32());
    for (auto& c : bin) c = static_cast<char>(rng.next_u32());
    if (trial % 2 == 0 && idx.size() >= 8) std::memcpy(idx.data(), "ZAYAIDX1", 8);  // get past the magic
    write_file(prefix + ".idx", idx);
    write_file(prefix + ".bin", bin);
    EXPECT_THROW(ShardReader::open(prefix), Error) << "trial " << trial;
  }
}

}  // namespace
}  // namespace zaya
