// Loss masks (NAME.mask beside a shard): written and read back through
// ShardReader, applied by the sampler as targets of -1, and refused, naming
// the file and the field, when they do not belong to the shard's tokens or
// are damaged.
#include "zaya/data/loss_mask.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/data/megatron_writer.h"
#include "zaya/data/sampler.h"
#include "zaya/data/shard_reader.h"
#include "zaya/data/shard_writer.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

constexpr uint32_t kVocab = 1000;

struct Docs {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<uint8_t>> masks;
  uint64_t selected = 0;
};

// Documents of 1..40 tokens (odd total sizes leave unused bits), a random half of each selected.
Docs random_docs(int n, uint64_t seed) {
  Rng rng{seed, 0, 0};
  Docs d;
  for (int i = 0; i < n; ++i) {
    const size_t len = 1 + rng.next_below(40);
    d.tokens.emplace_back(len);
    d.masks.emplace_back(len);
    for (size_t t = 0; t < len; ++t) {
      d.tokens.back()[t] = int32_t(rng.next_below(kVocab));
      d.masks.back()[t] = uint8_t(rng.next_below(2));
      d.selected += d.masks.back()[t];
    }
  }
  return d;
}

// PREFIX.{bin,idx} in `format` and PREFIX.mask of `docs`.
std::string write_masked(const TempDir& dir, const Docs& docs, const char* name = "sft", bool megatron = false) {
  const std::string prefix = dir.file(name);
  std::unique_ptr<DatasetWriter> w =
      make_dataset_writer(megatron ? DatasetFormat::kMegatron : DatasetFormat::kZaya, prefix, kVocab);
  LossMaskWriter m(prefix);
  for (size_t i = 0; i < docs.tokens.size(); ++i) {
    w->add_document(docs.tokens[i]);
    m.add_document(docs.tokens[i], docs.masks[i]);
  }
  w->prepare();
  m.prepare();
  m.commit();
  w->commit();
  return prefix;
}

TEST(LossMask, RoundTripsThroughTheShardReader) {
  TempDir dir;
  const Docs docs = random_docs(30, 1);
  for (bool megatron : {false, true}) {
    const std::string prefix = write_masked(dir, docs, megatron ? "mega" : "zaya", megatron);
    const ShardReader r = ShardReader::open(prefix, {ChecksumMode::kAlways, false, kVocab});
    ASSERT_TRUE(r.has_loss_mask());
    EXPECT_EQ(r.loss_tokens(), docs.selected);
    uint64_t at = 0;
    for (size_t d = 0; d < docs.tokens.size(); ++d)
      for (size_t t = 0; t < docs.tokens[d].size(); ++t, ++at)
        ASSERT_EQ(r.loss_selected(at), docs.masks[d][t] != 0) << "token " << at;
    EXPECT_EQ(at, r.num_tokens());
    EXPECT_EQ(std::filesystem::file_size(loss_mask_path(prefix)), kLossMaskHeaderBytes + (at + 7) / 8);
  }
  // A shard without a mask counts every token.
  ShardWriter plain(dir.file("plain"), kVocab);
  for (const auto& t : docs.tokens) plain.add_document(t);
  plain.finish();
  const ShardReader r = ShardReader::open(dir.file("plain"));
  EXPECT_FALSE(r.has_loss_mask());
  EXPECT_EQ(r.loss_tokens(), r.num_tokens());
  EXPECT_TRUE(r.loss_selected(0));
}

// The sampler gives target -1 exactly where the mask drops the target token,
// the same inputs as without a mask, and the unmasked targets elsewhere.
TEST(LossMask, SamplerDropsTheTargetsTheMaskDoesNotSelect) {
  TempDir dir;
  const Docs docs = random_docs(40, 2);
  const std::string prefix = write_masked(dir, docs);
  ShardWriter plain(dir.file("plain"), kVocab);
  for (const auto& t : docs.tokens) plain.add_document(t);
  plain.finish();
  const ShardReader masked = ShardReader::open(prefix), unmasked = ShardReader::open(dir.file("plain"));
  const int64_t seq = 16;
  TokenSampler a(masked, seq, SamplerOrder::kSequential), b(unmasked, seq, SamplerOrder::kSequential);
  EXPECT_TRUE(a.loss_masked());
  EXPECT_FALSE(b.loss_masked());
  std::vector<int32_t> ia(seq), ta(seq), ib(seq), tb(seq);
  uint64_t dropped = 0, kept = 0;
  for (uint64_t w = 0; w < a.windows_per_epoch(); ++w) {
    a.window(w, ia.data(), ta.data());
    b.window(w, ib.data(), tb.data());
    EXPECT_EQ(ia, ib);
    for (int64_t i = 0; i < seq; ++i) {
      const uint64_t target = w * uint64_t(seq) + uint64_t(i) + 1;
      if (masked.loss_selected(target)) {
        EXPECT_EQ(ta[i], tb[i]);
        ++kept;
      } else {
        EXPECT_EQ(ta[i], -1);
        ++dropped;
      }
    }
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_GT(kept, 0u);
}

// Expects ShardReader::open(prefix) to fail with every part in its message.
void expect_refused(const std::string& prefix, std::initializer_list<std::string> parts) {
  testing::expect_data_error([&] { ShardReader::open(prefix, {ChecksumMode::kAlways, false, kVocab}); }, parts);
}

TEST(LossMask, ReaderRefusesAMaskThatDoesNotMatch) {
  TempDir dir;
  const Docs docs = random_docs(20, 3);
  const std::string prefix = write_masked(dir, docs);
  const std::string mask = loss_mask_path(prefix);
  const std::string good = read_file(mask);
  auto patched = [&](size_t offset, const void* bytes, size_t n) {
    std::string s = good;
    std::memcpy(s.data() + offset, bytes, n);
    write_file(mask, s);
  };

  write_file(mask, good.substr(0, good.size() - 1));
  expect_refused(prefix, {mask, "bytes, but", "tokens need 48 +", "truncated or corrupt"});
  write_file(mask, good + std::string(1, '\0'));
  expect_refused(prefix, {mask, "truncated or corrupt"});
  write_file(mask, good.substr(0, 20));
  expect_refused(prefix, {mask, "shorter than the 48-byte header"});
  patched(0, "ZAYAMSK2", 8);
  expect_refused(prefix, {mask, "magic is not 'ZAYAMSK1'"});
  const uint32_t version = 2;
  patched(8, &version, 4);
  expect_refused(prefix, {mask, "format version 2 is not supported"});
  // One mask bit flipped: the mask checksum.
  std::string flipped = good;
  flipped[kLossMaskHeaderBytes] = char(flipped[kLossMaskHeaderBytes] ^ 1);
  write_file(mask, flipped);
  expect_refused(prefix, {mask, "xxh64 checksum of the mask bits"});
  const uint64_t selected = docs.selected + 1;
  patched(24, &selected, 8);
  expect_refused(prefix, {mask, "bits are set, but the header records"});
  write_file(mask, good);
  ASSERT_TRUE(ShardReader::open(prefix).has_loss_mask());

  // A mask of another shard: another length, or the same length over other tokens.
  Docs longer = docs;
  longer.tokens.push_back({1, 2, 3});
  longer.masks.push_back({1, 1, 1});
  const std::string other = write_masked(dir, longer, "other");
  std::filesystem::copy_file(loss_mask_path(other), mask, std::filesystem::copy_options::overwrite_existing);
  expect_refused(prefix, {mask, "the mask is for", "tokens, but the shard has", "another shard"});
  Docs changed = docs;
  changed.tokens[0][0] = (changed.tokens[0][0] + 1) % int32_t(kVocab);
  const std::string rebuilt = write_masked(dir, changed, "rebuilt");
  std::filesystem::copy_file(loss_mask_path(rebuilt), mask, std::filesystem::copy_options::overwrite_existing);
  expect_refused(prefix, {mask, "token checksum", "belongs to another build of the shard"});
  // The same for a Megatron dataset (its tokens hashed as the mask writer did).
  const std::string mega = write_masked(dir, docs, "mega", true);
  std::filesystem::copy_file(loss_mask_path(rebuilt), loss_mask_path(mega),
                             std::filesystem::copy_options::overwrite_existing);
  expect_refused(mega, {loss_mask_path(mega), "token checksum"});
}

TEST(LossMask, WriterChecksSizesAndCleansUp) {
  TempDir dir;
  {
    LossMaskWriter m(dir.file("x"));
    const std::vector<int32_t> t = {1, 2, 3};
    const std::vector<uint8_t> mask = {1, 0};
    testing::expect_data_error([&] { m.add_document(t, mask); }, {"document of 3 tokens has a mask of 2 entries"});
    m.prepare();
    EXPECT_TRUE(std::filesystem::exists(dir.file("x.mask.tmp")));
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.mask.tmp")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.mask")));
}

}  // namespace
}  // namespace zaya
