// Megatron-LM indexed datasets, checked against files built byte by byte
// from the format's public definition (docs/formats.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/data/megatron_format.h"
#include "zaya/data/megatron_writer.h"
#include "zaya/data/sampler.h"
#include "zaya/data/shard_reader.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

// Little-endian integers of `bytes` bytes.
void le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

// The index of 3 uint16 sequences of lengths 3, 0, 2 in 2 documents
// ({seq 0, seq 1}, {seq 2}), written field by field.
std::string hand_built_index(uint8_t dtype = 8, uint64_t version = 1, int64_t second_pointer = 6) {
  std::string s("MMIDIDX\0\0", 9);
  le(s, version, 8);
  s += static_cast<char>(dtype);
  le(s, 3, 8);  // sequences
  le(s, 3, 8);  // document indices (2 documents + 1)
  for (uint64_t len : {3, 0, 2}) le(s, len, 4);
  for (int64_t ptr : {int64_t{0}, second_pointer, int64_t{6}}) le(s, static_cast<uint64_t>(ptr), 8);
  for (uint64_t d : {0, 2, 3}) le(s, d, 8);
  return s;
}

std::string hand_built_bin() {
  std::string s;
  for (uint64_t t : {2, 700, 1, 2, 65000}) le(s, t, 2);  // uint16 ids
  return s;
}

TEST(Megatron, ReadsAHandBuiltDataset) {
  TempDir dir;
  const std::string idx = hand_built_index();
  ASSERT_EQ(idx.size(), 34u + 12 * 3 + 8 * 3);
  write_file(dir.file("ds.idx"), idx);
  write_file(dir.file("ds.bin"), hand_built_bin());
  EXPECT_EQ(shard_file_format(dir.file("ds")), ShardFileFormat::kMegatron);
  ShardReader r = ShardReader::open(dir.file("ds"));
  EXPECT_EQ(r.format(), ShardFileFormat::kMegatron);
  EXPECT_EQ(r.token_bytes(), 2u);
  EXPECT_EQ(r.num_tokens(), 5u);
  EXPECT_EQ(r.num_documents(), 2u);
  EXPECT_EQ(r.offsets(), (std::vector<uint64_t>{0, 3, 5}));
  EXPECT_EQ(r.vocab_size(), 65001u);  // no vocabulary given: the largest id + 1
  EXPECT_EQ(r.document(0), (std::vector<uint32_t>{2, 700, 1}));
  EXPECT_EQ(r.document(1), (std::vector<uint32_t>{2, 65000}));
  testing::expect_data_error([&] { r.tokens(); }, {"2 bytes wide"});

  // With the model's vocabulary, an id beyond it is an error naming the position.
  testing::expect_data_error(
      [&] {
        ShardReader::open(dir.file("ds"), {ChecksumMode::kAuto, true, 1000});
      },
      {"ds.bin: token 4 is 65000", "vocab size 1000"});

  // The sampler reads windows of any token width.
  ShardReader v = ShardReader::open(dir.file("ds"), {ChecksumMode::kAuto, false, 65536});
  TokenSampler s(v, 2, SamplerOrder::kSequential);
  int32_t in[2], tg[2];
  s.window(1, in, tg);
  EXPECT_EQ(std::vector<int32_t>(in, in + 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(std::vector<int32_t>(tg, tg + 2), (std::vector<int32_t>{2, 65000}));
  std::vector<int32_t> starts;
  s.document_starts(1, starts);
  EXPECT_EQ(starts, (std::vector<int32_t>{0, 1}));  // window 1 = tokens 2..3, document 1 starts at token 3
}

TEST(Megatron, RejectsMalformedIndexes) {
  TempDir dir;
  write_file(dir.file("ds.bin"), hand_built_bin());
  auto open_with = [&](const std::string& idx) {
    write_file(dir.file("ds.idx"), idx);
    return ShardReader::open(dir.file("ds"));
  };
  testing::expect_data_error([&] { open_with(hand_built_index(8, 2)); }, {"ds.idx: version 2", "expected 1"});
  testing::expect_data_error([&] { open_with(hand_built_index(7)); }, {"ds.idx: dtype code 7", "8 (uint16)"});
  testing::expect_data_error([&] { open_with(hand_built_index(8, 1, 8)); },
                             {"sequence 1 starts at byte 8", "back to back"});
  const std::string idx = hand_built_index();
  testing::expect_data_error([&] { open_with(idx.substr(0, idx.size() - 8)); },
                             {"3 sequences and 3 document indices", "truncated"});
  std::string decreasing = idx;
  decreasing[34 + 36 + 8] = 5;  // document index 1 = 5 > 3 sequences
  testing::expect_data_error([&] { open_with(decreasing); }, {"document index 1 is 5"});
  write_file(dir.file("ds.idx"), idx);
  write_file(dir.file("ds.bin"), hand_built_bin().substr(0, 8));
  testing::expect_data_error([&] { ShardReader::open(dir.file("ds")); }, {"ds.bin: file is 8 bytes", "10 bytes"});
}

// The writer's files are exactly the hand-built layout: one sequence per
// document, uint16 below 65500 ids, int32 from there.
TEST(Megatron, WriterMatchesTheLayoutByteForByte) {
  TempDir dir;
  {
    MegatronWriter w(dir.file("w"), 400);
    w.add_document(std::vector<int32_t>{2, 7, 1});
    w.add_document(std::vector<int32_t>{});
    w.add_document(std::vector<int32_t>{2, 399});
    EXPECT_EQ(w.dtype(), kMegatronUint16);
    w.prepare();
    EXPECT_FALSE(std::filesystem::exists(dir.file("w.idx")));  // nothing in place before commit
    w.commit();
  }
  std::string idx("MMIDIDX\0\0", 9);
  le(idx, 1, 8);
  idx += static_cast<char>(8);
  le(idx, 3, 8);
  le(idx, 4, 8);
  for (uint64_t len : {3, 0, 2}) le(idx, len, 4);
  for (uint64_t ptr : {0, 6, 6}) le(idx, ptr, 8);
  for (uint64_t d : {0, 1, 2, 3}) le(idx, d, 8);
  EXPECT_EQ(read_file(dir.file("w.idx")), idx);
  std::string bin;
  for (uint64_t t : {2, 7, 1, 2, 399}) le(bin, t, 2);
  EXPECT_EQ(read_file(dir.file("w.bin")), bin);

  {
    MegatronWriter w(dir.file("big"), 262144);
    w.add_document(std::vector<int32_t>{2, 262143});
    EXPECT_EQ(w.dtype(), kMegatronInt32);
    testing::expect_data_error([&] { w.add_document(std::vector<int32_t>{262144}); }, {"outside the vocabulary"});
    w.prepare();
    w.commit();
  }
  ShardReader r = ShardReader::open(dir.file("big"), {ChecksumMode::kAuto, true, 262144});
  EXPECT_EQ(r.token_bytes(), 4u);
  EXPECT_EQ(r.document(0), (std::vector<uint32_t>{2, 262143}));
  {
    MegatronWriter abandoned(dir.file("gone"), 400);
    abandoned.add_document(std::vector<int32_t>{1});
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("gone.bin.tmp")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("gone.idx")));
}

}  // namespace
}  // namespace zaya
