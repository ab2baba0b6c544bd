#include "zaya/data/shard_builder.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/data/corpus.h"
#include "zaya/data/test_util.h"
#include "zaya/data/tokenizer.h"

namespace zaya {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

ShardBuildOptions options_for(const TempDir& dir, const std::string& out) {
  ShardBuildOptions o;
  o.corpus.inputs = {dir.file("corpus.txt")};
  o.tokenizer_path = testing::small_tokenizer_path();
  o.out_dir = dir.file(out);
  o.val_fraction = 0.1;
  o.seed = 3;
  return o;
}

TEST(ShardBuild, DocumentsAreFramedAndSplit) {
  TempDir dir;
  write_file(dir.file("corpus.txt"), testing::kjv_slice(300'000));
  ShardBuildOptions o = options_for(dir, "shards");
  ShardBuildSummary s = build_token_shards(o);

  std::vector<CorpusDocument> docs;
  {
    CorpusReader reader(o.corpus.inputs[0]);
    CorpusDocument d;
    while (reader.next(d)) docs.push_back(d);
  }
  ASSERT_GT(docs.size(), 50u);
  EXPECT_EQ(s.train.documents + s.val.documents, docs.size());
  EXPECT_GE(s.val.documents, 1u);
  EXPECT_LT(s.val.documents, docs.size() / 3);
  EXPECT_EQ(s.vocab_size, 400u);
  EXPECT_EQ(s.train.prefix, dir.file("shards/train"));

  Tokenizer tok = Tokenizer::load(o.tokenizer_path);
  ShardReader train = ShardReader::open(s.train.prefix, {ChecksumMode::kAlways, true});
  ShardReader val = ShardReader::open(s.val.prefix, {ChecksumMode::kAlways, true});
  EXPECT_EQ(train.num_tokens(), s.train.tokens);
  EXPECT_EQ(val.num_tokens(), s.val.tokens);
  DocumentSplit split(docs.size(), o.val_fraction, o.seed);
  uint64_t t = 0, v = 0;
  for (const auto& doc : docs) {
    const ShardReader& shard = split.is_validation(doc.index) ? val : train;
    auto toks = shard.document(split.is_validation(doc.index) ? v++ : t++);
    ASSERT_GE(toks.size(), 2u);
    EXPECT_EQ(toks.front(), static_cast<uint32_t>(tok.bos_id()));
    EXPECT_EQ(toks.back(), static_cast<uint32_t>(tok.eos_id()));
    std::vector<int32_t> ids(toks.begin(), toks.end());
    ASSERT_EQ(tok.decode(ids), doc.text) << "document " << doc.index;
  }

  EXPECT_DOUBLE_EQ(s.train_unigram_entropy, unigram_entropy(train));
  EXPECT_GT(s.train_unigram_entropy, 3.0);
  EXPECT_LT(s.train_unigram_entropy, std::log(400.0));
}

TEST(ShardBuild, OutputIsIdenticalForAnyThreadCount) {
  TempDir dir;
  write_file(dir.file("corpus.txt"), testing::kjv_slice(150'000));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  build_token_shards(options_for(dir, "one"));
  omp_set_num_threads(3);
  build_token_shards(options_for(dir, "three"));
  omp_set_num_threads(saved);
  for (const char* f : {"train.bin", "train.idx", "val.bin", "val.idx"})
    EXPECT_EQ(read_file(dir.file(std::string("one/") + f)), read_file(dir.file(std::string("three/") + f))) << f;
}

TEST(ShardBuild, SplitIsSeededSpreadAndNeverEmpty) {
  const uint64_t n = 20000;
  DocumentSplit a(n, 0.02, 1), b(n, 0.02, 1), c(n, 0.02, 2);
  uint64_t val = 0, first_half = 0, differ = 0;
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.is_validation(i), b.is_validation(i));
    val += a.is_validation(i);
    first_half += a.is_validation(i) && i < n / 2;
    differ += a.is_validation(i) != c.is_validation(i);
  }
  EXPECT_NEAR(static_cast<double>(val), 400.0, 80.0);             // 2% (binomial sd ~ 20)
  EXPECT_NEAR(static_cast<double>(first_half), val / 2.0, 60.0);  // spread through the corpus
  EXPECT_GT(differ, 300u);                                        // another seed, another split

  for (uint64_t docs : {2, 3, 10}) {
    for (double f : {0.0, 0.001, 0.999}) {
      DocumentSplit s(docs, f, 5);
      uint64_t v = 0;
      for (uint64_t i = 0; i < docs; ++i) v += s.is_validation(i);
      EXPECT_GE(v, 1u) << docs << " documents, val_fraction " << f;
      EXPECT_LE(v, docs - 1) << docs << " documents, val_fraction " << f;
    }
  }
  EXPECT_THROW(DocumentSplit(1, 0.5, 0), Error);
  EXPECT_THROW(DocumentSplit(10, 1.0, 0), Error);
}

TEST(ShardBuild, Errors) {
  TempDir dir;
  write_file(dir.file("corpus.txt"), "just one document\nof two lines\n");
  ShardBuildOptions o = options_for(dir, "out");
  try {
    build_token_shards(o);
    ADD_FAILURE() << "expected zaya::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corpus.txt: corpus has 1 document(s)"), std::string::npos) << e.what();
  }
  write_file(dir.file("corpus.txt"), "one\n\ntwo\n");
  o.val_fraction = 1.0;
  EXPECT_THROW(build_token_shards(o), Error);
  o.val_fraction = 0.5;
  o.tokenizer_path = dir.file("missing.model");
  EXPECT_THROW(build_token_shards(o), Error);
  o.tokenizer_path = testing::small_tokenizer_path();
  ShardBuildSummary s = build_token_shards(o);
  EXPECT_EQ(s.train.documents, 1u);
  EXPECT_EQ(s.val.documents, 1u);
}

// The same documents as text, JSONL, gzip and zstd, in one file or many,
// give byte-identical shards; and so does any worker count.
TEST(ShardBuild, InputsAndWorkersGiveIdenticalOutput) {
  TempDir dir;
  const std::string text = testing::kjv_slice(120'000);
  write_file(dir.file("corpus.txt"), text);
  std::vector<CorpusDocument> docs;
  {
    CorpusReader reader(dir.file("corpus.txt"));
    CorpusDocument d;
    while (reader.next(d)) docs.push_back(d);
  }
  std::string jsonl_a, jsonl_b;
  for (size_t i = 0; i < docs.size(); ++i)
    (i < docs.size() / 2 ? jsonl_a : jsonl_b) +=
        nlohmann::json{{"id", i}, {"doc", {{"text", docs[i].text}}}}.dump() + "\n";
  std::filesystem::create_directories(dir.file("parts"));
  write_file(dir.file("parts/00.jsonl.gz"), testing::gzip_bytes(jsonl_a));
  write_file(dir.file("parts/01.jsonl.zst"), testing::zstd_bytes(jsonl_b));

  ShardBuildOptions o = options_for(dir, "plain");
  o.workers = 1;
  build_token_shards(o);
  ShardBuildOptions j = options_for(dir, "jsonl");
  j.corpus.inputs = {dir.file("parts")};
  j.corpus.field = "doc.text";
  for (int workers : {1, 2, 5}) {
    j.workers = workers;
    j.out_dir = dir.file("jsonl" + std::to_string(workers));
    ShardBuildSummary s = build_token_shards(j);
    EXPECT_EQ(s.corpus_files, 2u);
    EXPECT_EQ(s.train.documents + s.val.documents, docs.size());
    for (const char* f : {"train.bin", "train.idx", "val.bin", "val.idx"})
      EXPECT_EQ(read_file(dir.file(std::string("plain/") + f)), read_file(j.out_dir + "/" + f))
          << f << ", " << workers << " workers";
  }
}

TEST(ShardBuild, BadRecordsFailOrAreSkippedAndCounted) {
  TempDir dir;
  write_file(dir.file("c.jsonl"),
             "{\"text\": \"In the beginning\"}\n{\"text\": \"God created\"}\n{\"txt\": \"oops\"}\n"
             "{\"text\": \"the heaven\"}\nnot json\n{\"text\": \"and the earth\"}\n");
  ShardBuildOptions o = options_for(dir, "out");
  o.corpus.inputs = {dir.file("c.jsonl")};
  testing::expect_data_error([&] { build_token_shards(o); }, {"c.jsonl: line 3: field 'text' not found", "--skip-bad"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.idx")));
  o.corpus.skip_bad = true;
  ShardBuildSummary s = build_token_shards(o);
  EXPECT_EQ(s.skipped, 2u);
  EXPECT_NE(s.first_skipped.find("line 3"), std::string::npos) << s.first_skipped;
  EXPECT_EQ(s.train.documents + s.val.documents, 4u);
}

// Fine-tuning data: each JSONL conversation is one document, rendered as
// encode_sft_example renders it, with its loss mask beside each split; the
// output is the same for any worker count; a bad example stops the build with
// FILE: line N: REASON or is skipped; a plain build into the same directory
// removes the masks (a stale mask would be refused by the reader).
TEST(ShardBuild, FineTuningDataHasLossMasks) {
  TempDir dir;
  std::string jsonl;
  std::vector<nlohmann::json> examples;
  for (int i = 0; i < 60; ++i) {
    nlohmann::json e = i % 3 == 2 ? nlohmann::json{{"prompt", "Say " + std::to_string(i) + ":"},
                                                   {"completion", " " + std::to_string(i * 7)}}
                                  : nlohmann::json{{"messages",
                                                    {{{"role", "user"}, {"content", "count to " + std::to_string(i)}},
                                                     {{"role", "assistant"}, {"content", std::to_string(i + 1)}}}}};
    examples.push_back(e);
    jsonl += e.dump() + "\n";
    if (i == 10) jsonl += "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}]}\n";  // line 12
  }
  write_file(dir.file("chat.jsonl"), jsonl);
  ShardBuildOptions o = options_for(dir, "sft");
  o.corpus.inputs = {dir.file("chat.jsonl")};
  o.sft = SftOptions{};
  testing::expect_data_error(
      [&] { build_token_shards(o); },
      {"chat.jsonl: line 12: messages[0].role is \"assistant\" where \"user\" is expected", "--skip-bad"});
  o.corpus.skip_bad = true;
  o.workers = 1;
  const ShardBuildSummary s = build_token_shards(o);
  EXPECT_EQ(s.skipped, 1u);
  EXPECT_EQ(s.train.documents + s.val.documents, examples.size());

  Tokenizer tok = Tokenizer::load(o.tokenizer_path);
  uint64_t selected = 0, tokens = 0;
  for (const auto& e : examples) {
    const SftDocument d = encode_sft_example(tok, parse_sft_example(e, PairFormat::kText), LossOn::kAssistant);
    tokens += d.tokens.size();
    selected += uint64_t(std::count(d.mask.begin(), d.mask.end(), uint8_t{1}));
  }
  EXPECT_EQ(s.train.tokens + s.val.tokens, tokens);
  EXPECT_EQ(s.train.loss_tokens + s.val.loss_tokens, selected);
  EXPECT_LT(s.train.loss_tokens, s.train.tokens);
  for (const SplitSummary* split : {&s.train, &s.val}) {
    const ShardReader r = ShardReader::open(split->prefix, {ChecksumMode::kAlways, true});
    ASSERT_TRUE(r.has_loss_mask()) << split->prefix;
    EXPECT_EQ(r.loss_tokens(), split->loss_tokens);
  }
  // The first training document, token by token.
  const ShardReader train = ShardReader::open(s.train.prefix);
  DocumentSplit split(examples.size(), o.val_fraction, o.seed);
  size_t first = 0;
  while (split.is_validation(first)) ++first;
  const SftDocument d =
      encode_sft_example(tok, parse_sft_example(examples[first], PairFormat::kText), LossOn::kAssistant);
  const std::vector<uint32_t> doc = train.document(0);
  ASSERT_EQ(doc.size(), d.tokens.size());
  for (size_t i = 0; i < doc.size(); ++i) {
    EXPECT_EQ(int32_t(doc[i]), d.tokens[i]) << i;
    EXPECT_EQ(train.loss_selected(i), d.mask[i] != 0) << i;
  }

  for (int workers : {2, 5}) {
    ShardBuildOptions w = o;
    w.workers = workers;
    w.out_dir = dir.file("sft" + std::to_string(workers));
    build_token_shards(w);
    for (const char* f : {"train.bin", "train.idx", "train.mask", "val.bin", "val.idx", "val.mask"})
      EXPECT_EQ(read_file(o.out_dir + "/" + f), read_file(w.out_dir + "/" + f)) << f << ", " << workers << " workers";
  }

  ShardBuildOptions all = o;
  all.sft->loss_on = LossOn::kAll;
  all.out_dir = dir.file("all");
  const ShardBuildSummary every = build_token_shards(all);
  EXPECT_EQ(every.train.loss_tokens, every.train.tokens);
  EXPECT_EQ(every.train.tokens, s.train.tokens);

  write_file(dir.file("corpus.txt"), testing::kjv_slice(50'000));
  build_token_shards(options_for(dir, "sft"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("sft/train.mask")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("sft/val.mask")));
  EXPECT_FALSE(ShardReader::open(dir.file("sft/train")).has_loss_mask());
}

// A build that stops part-way (here: its progress callback throws) commits
// nothing: the previous dataset is still there, whole, and no temporary file is left.
TEST(ShardBuild, InterruptedBuildLeavesThePreviousDatasetOnly) {
  TempDir dir;
  write_file(dir.file("corpus.txt"), testing::kjv_slice(200'000));
  ShardBuildOptions o = options_for(dir, "out");
  build_token_shards(o);
  const std::string before = read_file(dir.file("out/train.bin")) + read_file(dir.file("out/val.idx"));
  write_file(dir.file("corpus.txt"), read_file(testing::kjv_path()));  // several batches
  int calls = 0;
  o.progress_interval_s = 0.0;
  o.progress = [&](const ShardBuildProgress& p) {
    EXPECT_GT(p.bytes_total, 0u);
    if (++calls == 2) throw std::runtime_error("interrupted");
  };
  o.workers = 2;
  EXPECT_THROW(build_token_shards(o), std::runtime_error);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(read_file(dir.file("out/train.bin")) + read_file(dir.file("out/val.idx")) == before);
  for (const auto& e : std::filesystem::directory_iterator(dir.file("out")))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  // An uninterrupted build reports its end.
  bool finished = false;
  o.progress = [&](const ShardBuildProgress& p) {
    if (p.finished) {
      finished = true;
      EXPECT_EQ(p.bytes_read, p.bytes_total);
    }
  };
  build_token_shards(o);
  EXPECT_TRUE(finished);
  EXPECT_FALSE(read_file(dir.file("out/train.bin")) + read_file(dir.file("out/val.idx")) == before);
}

// --format megatron writes the same documents as a Megatron indexed dataset,
// which the reader opens (uint16 ids for this 400-piece vocabulary).
TEST(ShardBuild, MegatronFormatHoldsTheSameDocuments) {
  TempDir dir;
  write_file(dir.file("corpus.txt"), testing::kjv_slice(100'000));
  ShardBuildSummary z = build_token_shards(options_for(dir, "zaya"));
  ShardBuildOptions o = options_for(dir, "megatron");
  o.format = DatasetFormat::kMegatron;
  ShardBuildSummary m = build_token_shards(o);
  EXPECT_EQ(m.train.tokens, z.train.tokens);
  EXPECT_DOUBLE_EQ(m.train_unigram_entropy, z.train_unigram_entropy);
  for (const char* split : {"train", "val"}) {
    ShardReader a = ShardReader::open(dir.file(std::string("zaya/") + split));
    ShardReader b = ShardReader::open(dir.file(std::string("megatron/") + split), {ChecksumMode::kAuto, true, 400});
    EXPECT_EQ(b.format(), ShardFileFormat::kMegatron);
    EXPECT_EQ(b.token_bytes(), 2u);
    EXPECT_EQ(std::filesystem::file_size(dir.file(std::string("megatron/") + split + ".bin")), 2 * a.num_tokens());
    EXPECT_EQ(a.offsets(), b.offsets());
    for (uint64_t d = 0; d < a.num_documents(); ++d) ASSERT_EQ(a.document(d), b.document(d)) << split << " " << d;
  }
}

TEST(ShardBuild, UnigramEntropy) {
  std::vector<uint64_t> uniform = {5, 5, 5, 5, 0};
  EXPECT_NEAR(unigram_entropy(uniform), std::log(4.0), 1e-12);
  std::vector<uint64_t> single = {0, 9, 0};
  EXPECT_EQ(unigram_entropy(single), 0.0);
  std::vector<uint64_t> skewed = {3, 1};
  EXPECT_NEAR(unigram_entropy(skewed), -(0.75 * std::log(0.75) + 0.25 * std::log(0.25)), 1e-12);
  EXPECT_EQ(unigram_entropy(std::vector<uint64_t>{}), 0.0);
}

}  // namespace
}  // namespace zaya
