#pragma once
// Writes a Megatron-LM indexed dataset PREFIX.{bin,idx} (megatron_format.h):
// one sequence per document, every document one sequence (document indices
// 0, 1, ..., D), the dtype Megatron would pick for the vocabulary (uint16
// below 65500 ids, else int32). Tokens stream to PREFIX.bin.tmp; the lengths
// (4 bytes per document) stay in memory until prepare() writes the index.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "zaya/data/dataset_writer.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {

class MegatronWriter : public DatasetWriter {
 public:
  MegatronWriter(std::string prefix, uint32_t vocab_size);
  MegatronWriter(const MegatronWriter&) = delete;
  MegatronWriter& operator=(const MegatronWriter&) = delete;
  ~MegatronWriter() override;

  void add_document(std::span<const int32_t> tokens) override;
  void prepare() override;
  void commit() override;
  uint64_t num_documents() const override { return lengths_.size(); }
  uint64_t num_tokens() const override { return tokens_; }
  const std::string& prefix() const override { return prefix_; }
  uint8_t dtype() const { return dtype_; }

 private:
  void flush_buffer();

  std::string prefix_;
  uint32_t vocab_size_;
  uint8_t dtype_;
  uint32_t token_bytes_;
  FileDescriptor bin_;
  std::vector<unsigned char> buffer_;
  std::vector<int32_t> lengths_;
  uint64_t tokens_ = 0;
  bool prepared_ = false, committed_ = false;
};

}  // namespace zaya
