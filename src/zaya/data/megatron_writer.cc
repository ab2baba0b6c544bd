#include "zaya/data/megatron_writer.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/data/megatron_format.h"

namespace zaya {
namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;

std::string bin_tmp(const std::string& prefix) { return prefix + ".bin.tmp"; }
std::string idx_tmp(const std::string& prefix) { return prefix + ".idx.tmp"; }

}  // namespace

MegatronWriter::MegatronWriter(std::string prefix, uint32_t vocab_size)
    : prefix_(std::move(prefix)),
      vocab_size_(vocab_size),
      dtype_(megatron_dtype_for_vocab(vocab_size)),
      token_bytes_(megatron_token_bytes(dtype_)) {
  ZAYA_CHECK(vocab_size_ > 0 && vocab_size_ <= static_cast<uint32_t>(INT32_MAX),
             "{}.idx: vocab_size {} is outside [1, {}]", prefix_, vocab_size_, INT32_MAX);
  const std::filesystem::path parent = std::filesystem::path(prefix_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    ZAYA_CHECK(!ec, "{}: cannot create directory: {}", parent.string(), ec.message());
  }
  buffer_.reserve(kBufferBytes);
  bin_ = FileDescriptor::create(bin_tmp(prefix_));
}

MegatronWriter::~MegatronWriter() {
  if (committed_) return;
  bin_ = FileDescriptor();
  ::unlink(bin_tmp(prefix_).c_str());
  ::unlink(idx_tmp(prefix_).c_str());
}

void MegatronWriter::add_document(std::span<const int32_t> tokens) {
  ZAYA_CHECK(!prepared_, "{}.bin: add_document after prepare()", prefix_);
  ZAYA_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX),
             "{}.bin: document {} has {} tokens; a Megatron sequence holds at most {} (int32 lengths)", prefix_,
             lengths_.size(), tokens.size(), INT32_MAX);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    ZAYA_CHECK(id >= 0 && static_cast<uint32_t>(id) < vocab_size_,
               "{}.bin: document {} token {} is {}, outside the vocabulary [0, {})", prefix_, lengths_.size(), i, id,
               vocab_size_);
    const uint32_t u = static_cast<uint32_t>(id);
    unsigned char bytes[4];
    std::memcpy(bytes, &u, 4);  // little-endian host (shard_format.h asserts it)
    buffer_.insert(buffer_.end(), bytes, bytes + token_bytes_);
    if (buffer_.size() >= kBufferBytes) flush_buffer();
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += tokens.size();
}

void MegatronWriter::flush_buffer() {
  bin_.write_all(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void MegatronWriter::prepare() {
  ZAYA_CHECK(!prepared_, "{}: prepare() called twice", prefix_);
  flush_buffer();
  bin_.sync();
  bin_.close();

  const uint64_t sequences = lengths_.size();
  const uint64_t doc_indices = sequences + 1;
  std::vector<unsigned char> idx;
  idx.reserve(kMegatronHeaderBytes + sequences * 20 + 8);
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    idx.insert(idx.end(), b, b + n);
  };
  put(kMegatronIdxMagic.data(), kMegatronIdxMagic.size());
  put(&kMegatronVersion, 8);
  put(&dtype_, 1);
  put(&sequences, 8);
  put(&doc_indices, 8);
  put(lengths_.data(), lengths_.size() * sizeof(int32_t));
  int64_t pointer = 0;
  for (int32_t len : lengths_) {
    put(&pointer, 8);
    pointer += int64_t{len} * token_bytes_;
  }
  for (uint64_t d = 0; d <= sequences; ++d) {
    const int64_t i = static_cast<int64_t>(d);
    put(&i, 8);
  }
  FileDescriptor f = FileDescriptor::create(idx_tmp(prefix_));
  f.write_all(idx.data(), idx.size());
  f.sync();
  f.close();
  prepared_ = true;
}

void MegatronWriter::commit() {
  ZAYA_CHECK(prepared_ && !committed_, "{}: commit() needs one prepare() before it", prefix_);
  rename_file(bin_tmp(prefix_), prefix_ + ".bin");
  rename_file(idx_tmp(prefix_), prefix_ + ".idx");
  sync_parent_directory(prefix_ + ".idx");
  committed_ = true;
}

}  // namespace zaya
