#pragma once
// What the shard builder writes to: a zaya token shard (shard_writer.h) or a
// Megatron-LM indexed dataset (megatron_writer.h), chosen by format.
//
// Writing is two-phase so that a build of several files can be committed
// together: prepare() writes and fsyncs every file under a temporary name,
// commit() renames them into place (.bin first, then .idx). A writer that is
// destroyed before commit() removes its temporary files.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace zaya {

enum class DatasetFormat {
  kZaya,      // NAME.bin uint32 tokens + NAME.idx "ZAYAIDX1" (shard_format.h)
  kMegatron,  // Megatron-LM's MMapIndexedDataset: NAME.bin + NAME.idx "MMIDIDX" (megatron_format.h)
};

// "zaya" or "megatron"; fails naming the allowed values.
DatasetFormat parse_dataset_format(const std::string& name);
const char* dataset_format_name(DatasetFormat format);

class DatasetWriter {
 public:
  virtual ~DatasetWriter() = default;
  // Appends one document; fails on an id outside [0, vocab_size).
  virtual void add_document(std::span<const int32_t> tokens) = 0;
  virtual void prepare() = 0;
  virtual void commit() = 0;
  virtual uint64_t num_documents() const = 0;
  virtual uint64_t num_tokens() const = 0;
  virtual const std::string& prefix() const = 0;
};

// A writer of `format` for PREFIX.{bin,idx}.
std::unique_ptr<DatasetWriter> make_dataset_writer(DatasetFormat format, const std::string& prefix,
                                                   uint32_t vocab_size);

}  // namespace zaya
