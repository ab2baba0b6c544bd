#include "zaya/data/loss_mask.h"

#include <unistd.h>

#include <bit>
#include <cstring>

#include "zaya/core/error.h"

namespace zaya {
namespace {

std::string tmp_path(const std::string& prefix) { return loss_mask_path(prefix) + ".tmp"; }

uint64_t mask_bytes(uint64_t tokens) { return (tokens + 7) / 8; }

}  // namespace

LossMask read_loss_mask(const std::string& prefix, uint64_t num_tokens, uint64_t tokens_xxh64, bool check_tokens) {
  const std::string path = loss_mask_path(prefix);
  FileDescriptor f = FileDescriptor::open_read(path);
  const uint64_t size = f.size();
  ZAYA_CHECK(size >= kLossMaskHeaderBytes,
             "{}: file is {} bytes, shorter than the {}-byte header (truncated, or not a loss mask)", path, size,
             kLossMaskHeaderBytes);
  LossMaskHeader h{};
  f.read_exact(&h, sizeof(h), 0, "the header");
  ZAYA_CHECK(std::memcmp(h.magic, kLossMaskMagic.data(), sizeof(h.magic)) == 0,
             "{}: magic is not '{}' (not a zaya loss mask)", path, kLossMaskMagic);
  ZAYA_CHECK(h.version == kLossMaskVersion, "{}: format version {} is not supported; expected {}", path, h.version,
             kLossMaskVersion);
  ZAYA_CHECK(h.reserved == 0, "{}: reserved field is {}, expected 0", path, h.reserved);
  ZAYA_CHECK(h.num_tokens == num_tokens,
             "{}: the mask is for {} tokens, but the shard has {} (a mask of another shard, or of an earlier build)",
             path, h.num_tokens, num_tokens);
  ZAYA_CHECK(size == kLossMaskHeaderBytes + mask_bytes(num_tokens),
             "{}: file is {} bytes, but {} tokens need {} + {} bytes (truncated or corrupt)", path, size, num_tokens,
             kLossMaskHeaderBytes, mask_bytes(num_tokens));
  ZAYA_CHECK(!check_tokens || h.tokens_xxh64 == tokens_xxh64,
             "{}: token checksum is {:016x}, but the shard's tokens have {:016x} (the mask belongs to another build "
             "of the shard; rebuild it with zaya data sft)",
             path, h.tokens_xxh64, tokens_xxh64);
  std::vector<uint8_t> bits(mask_bytes(num_tokens));
  if (!bits.empty()) f.read_exact(bits.data(), bits.size(), kLossMaskHeaderBytes, "the mask bits");
  const uint64_t actual = XXH64(bits.data(), bits.size(), 0);
  ZAYA_CHECK(actual == h.mask_xxh64, "{}: xxh64 checksum of the mask bits is {:016x}, but the header records {:016x}",
             path, actual, h.mask_xxh64);
  uint64_t selected = 0;
  for (uint8_t b : bits) selected += static_cast<uint64_t>(std::popcount(b));
  const unsigned tail = static_cast<unsigned>(num_tokens % 8);
  ZAYA_CHECK(tail == 0 || (bits.back() >> tail) == 0, "{}: bits beyond token {} are set (corrupt)", path, num_tokens);
  ZAYA_CHECK(selected == h.num_selected, "{}: {} bits are set, but the header records {} selected tokens", path,
             selected, h.num_selected);
  return LossMask(std::move(bits), num_tokens, selected);
}

LossMaskWriter::LossMaskWriter(std::string prefix) : prefix_(std::move(prefix)) {
  token_hash_.reset(XXH64_createState());
  ZAYA_CHECK(token_hash_ != nullptr, "{}: out of memory creating the checksum state", loss_mask_path(prefix_));
  XXH64_reset(token_hash_.get(), 0);
}

LossMaskWriter::~LossMaskWriter() {
  if (!committed_) ::unlink(tmp_path(prefix_).c_str());
}

void LossMaskWriter::add_document(std::span<const int32_t> tokens, std::span<const uint8_t> mask) {
  ZAYA_CHECK(!prepared_, "{}: add_document after prepare()", loss_mask_path(prefix_));
  ZAYA_CHECK(tokens.size() == mask.size(), "{}: document of {} tokens has a mask of {} entries",
             loss_mask_path(prefix_), tokens.size(), mask.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t id = static_cast<uint32_t>(tokens[i]);  // little-endian on disk (shard_format.h)
    XXH64_update(token_hash_.get(), &id, sizeof(id));
    const uint64_t at = tokens_ + i;
    if (at % 8 == 0) bits_.push_back(0);
    if (mask[i] != 0) {
      bits_.back() = static_cast<uint8_t>(bits_.back() | (1u << (at % 8)));
      ++selected_;
    }
  }
  tokens_ += tokens.size();
}

void LossMaskWriter::prepare() {
  ZAYA_CHECK(!prepared_, "{}: prepare() called twice", loss_mask_path(prefix_));
  LossMaskHeader h{};
  std::memcpy(h.magic, kLossMaskMagic.data(), sizeof(h.magic));
  h.version = kLossMaskVersion;
  h.num_tokens = tokens_;
  h.num_selected = selected_;
  h.tokens_xxh64 = XXH64_digest(token_hash_.get());
  h.mask_xxh64 = XXH64(bits_.data(), bits_.size(), 0);
  FileDescriptor f = FileDescriptor::create(tmp_path(prefix_));
  f.write_all(&h, sizeof(h));
  if (!bits_.empty()) f.write_all(bits_.data(), bits_.size());
  f.sync();
  f.close();
  prepared_ = true;
}

void LossMaskWriter::commit() {
  ZAYA_CHECK(prepared_ && !committed_, "{}: commit() needs one prepare() before it", loss_mask_path(prefix_));
  rename_file(tmp_path(prefix_), loss_mask_path(prefix_));
  sync_parent_directory(loss_mask_path(prefix_));
  committed_ = true;
}

}  // namespace zaya
