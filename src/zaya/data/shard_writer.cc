#include "zaya/data/shard_writer.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/data/shard_format.h"

namespace zaya {
namespace {

// Tokens are written in blocks of this many (4 MiB).
constexpr size_t kBufferTokens = size_t{1} << 20;

std::string bin_tmp(const std::string& prefix) { return shard_bin_path(prefix) + ".tmp"; }
std::string idx_tmp(const std::string& prefix) { return shard_idx_path(prefix) + ".tmp"; }

}  // namespace

ShardWriter::ShardWriter(std::string prefix, uint32_t vocab_size)
    : prefix_(std::move(prefix)), vocab_size_(vocab_size) {
  ZAYA_CHECK(vocab_size_ > 0 && vocab_size_ <= static_cast<uint32_t>(INT32_MAX), "{}: vocab_size {} is outside [1, {}]",
             shard_idx_path(prefix_), vocab_size_, INT32_MAX);
  std::filesystem::path parent = std::filesystem::path(prefix_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    ZAYA_CHECK(!ec, "{}: cannot create directory: {}", parent.string(), ec.message());
  }
  hash_.reset(XXH64_createState());
  ZAYA_CHECK(hash_ != nullptr, "{}: out of memory creating the checksum state", shard_bin_path(prefix_));
  XXH64_reset(hash_.get(), 0);
  buffer_.reserve(kBufferTokens);
  bin_ = FileDescriptor::create(bin_tmp(prefix_));
}

ShardWriter::~ShardWriter() {
  if (!finished_) discard();
}

void ShardWriter::discard() noexcept {
  bin_ = FileDescriptor();
  ::unlink(bin_tmp(prefix_).c_str());
  ::unlink(idx_tmp(prefix_).c_str());
}

void ShardWriter::add_document(std::span<const int32_t> tokens) {
  ZAYA_CHECK(!prepared_, "{}: add_document after finish()", shard_bin_path(prefix_));
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t id = tokens[i];
    ZAYA_CHECK(id >= 0 && static_cast<uint32_t>(id) < vocab_size_,
               "{}: document {} token {} is {}, outside the vocabulary [0, {})", shard_bin_path(prefix_),
               num_documents(), i, id, vocab_size_);
    buffer_.push_back(static_cast<uint32_t>(id));
    if (buffer_.size() == kBufferTokens) flush_buffer();
  }
  offsets_.push_back(offsets_.back() + tokens.size());
}

void ShardWriter::flush_buffer() {
  size_t bytes = buffer_.size() * kShardTokenBytes;
  XXH64_update(hash_.get(), buffer_.data(), bytes);
  bin_.write_all(buffer_.data(), bytes);
  buffer_.clear();
}

ShardWriteSummary ShardWriter::finish() {
  prepare();
  commit();
  return ShardWriteSummary{prefix_, vocab_size_, num_documents(), num_tokens(), bin_xxh64_};
}

void ShardWriter::prepare() {
  ZAYA_CHECK(!prepared_, "{}: finish() or prepare() called twice", shard_bin_path(prefix_));
  flush_buffer();
  bin_.sync();
  bin_.close();

  ShardIdxHeader header{};
  std::memcpy(header.magic, kShardIdxMagic.data(), sizeof(header.magic));
  header.version = kShardFormatVersion;
  header.vocab_size = vocab_size_;
  header.num_documents = num_documents();
  header.num_tokens = num_tokens();
  header.bin_xxh64 = bin_xxh64_ = XXH64_digest(hash_.get());

  FileDescriptor idx = FileDescriptor::create(idx_tmp(prefix_));
  idx.write_all(&header, sizeof(header));
  idx.write_all(offsets_.data(), offsets_.size() * sizeof(uint64_t));
  idx.sync();
  idx.close();
  prepared_ = true;
}

void ShardWriter::commit() {
  ZAYA_CHECK(prepared_ && !finished_, "{}: commit() needs one prepare() before it", shard_bin_path(prefix_));
  rename_file(bin_tmp(prefix_), shard_bin_path(prefix_));
  rename_file(idx_tmp(prefix_), shard_idx_path(prefix_));
  sync_parent_directory(shard_idx_path(prefix_));
  finished_ = true;
}

}  // namespace zaya
