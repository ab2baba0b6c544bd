#pragma once
// Writes a token shard (format in shard_format.h and docs/formats-data.md).
//
// The writer streams tokens to PREFIX.bin.tmp while hashing them, keeps the
// document offsets in memory (8 bytes per document), and on finish() writes
// PREFIX.idx.tmp, fsyncs both files and renames them into place (.bin first,
// then .idx). A crash leaves either the previous shard, or a new .bin beside
// an old .idx, which the reader rejects (size or checksum mismatch): never a
// shard that reads as valid but is not. An unfinished writer removes its
// temporary files when destroyed.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <xxhash.h>

#include "zaya/data/dataset_writer.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {

struct ShardWriteSummary {
  std::string prefix;
  uint32_t vocab_size = 0;
  uint64_t num_documents = 0;
  uint64_t num_tokens = 0;
  uint64_t bin_xxh64 = 0;
};

class ShardWriter : public DatasetWriter {
 public:
  // Starts a shard at PREFIX.{bin,idx}; token ids must be < vocab_size.
  ShardWriter(std::string prefix, uint32_t vocab_size);
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ~ShardWriter() override;

  // Appends one document (may be empty). Fails on an id outside [0, vocab_size).
  void add_document(std::span<const int32_t> tokens) override;

  // Writes the index, makes both files durable and renames them into place
  // (prepare() then commit()).
  ShardWriteSummary finish();
  // Writes PREFIX.idx.tmp and makes both temporary files durable.
  void prepare() override;
  // Renames PREFIX.bin.tmp and PREFIX.idx.tmp into place.
  void commit() override;

  uint64_t num_documents() const override { return offsets_.size() - 1; }
  uint64_t num_tokens() const override { return offsets_.back(); }
  const std::string& prefix() const override { return prefix_; }

 private:
  void flush_buffer();
  void discard() noexcept;

  std::string prefix_;
  uint32_t vocab_size_;
  FileDescriptor bin_;
  std::vector<uint32_t> buffer_;
  std::vector<uint64_t> offsets_{0};
  struct HashFree {
    void operator()(XXH64_state_t* s) const { XXH64_freeState(s); }
  };
  std::unique_ptr<XXH64_state_t, HashFree> hash_;
  uint64_t bin_xxh64_ = 0;
  bool prepared_ = false;
  bool finished_ = false;
};

}  // namespace zaya
