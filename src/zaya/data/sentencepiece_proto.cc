#include "zaya/data/sentencepiece_proto.h"

#include "zaya/core/error.h"

namespace zaya {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// A protobuf wire-format cursor over one message's bytes.
class Wire {
 public:
  Wire(std::string_view bytes, std::string_view label) : bytes_(bytes), label_(label) {}

  bool done() const { return pos_ == bytes_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      ZAYA_CHECK(pos_ < bytes_.size(), "{}: SentencePiece model ends inside a varint at byte {}", label_, pos_);
      const auto b = static_cast<uint8_t>(bytes_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    fail("{}: SentencePiece model has a varint longer than 10 bytes at byte {}", label_, pos_);
  }

  std::string_view take(uint64_t n) {
    ZAYA_CHECK(n <= bytes_.size() - pos_, "{}: SentencePiece model: a {}-byte field at byte {} runs past its end",
               label_, n, pos_);
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  // Skips the value of a field of wire type `type`.
  void skip(uint32_t type) {
    switch (type) {
      case kVarint: varint(); return;
      case kFixed64: take(8); return;
      case kBytes: take(varint()); return;
      case kFixed32: take(4); return;
      default: fail("{}: SentencePiece model: wire type {} at byte {} is not supported", label_, type, pos_);
    }
  }

 private:
  std::string_view bytes_;
  std::string_view label_;
  size_t pos_ = 0;
};

int32_t piece_type(std::string_view message, std::string_view label) {
  Wire w(message, label);
  int32_t type = 1;  // NORMAL
  while (!w.done()) {
    const uint64_t tag = w.varint();
    if (tag == ((3 << 3) | kVarint)) {
      type = static_cast<int32_t>(w.varint());
      ZAYA_CHECK(type >= 1 && type <= 6, "{}: SentencePiece model: piece type {} is not 1..6", label, type);
    } else {
      w.skip(static_cast<uint32_t>(tag & 7));
    }
  }
  return type;
}

bool add_dummy_prefix(std::string_view message, std::string_view label) {
  Wire w(message, label);
  bool add = true;
  while (!w.done()) {
    const uint64_t tag = w.varint();
    if (tag == ((3 << 3) | kVarint))
      add = w.varint() != 0;
    else
      w.skip(static_cast<uint32_t>(tag & 7));
  }
  return add;
}

}  // namespace

SentencePieceProtoInfo decode_sentencepiece_proto(std::string_view serialized, std::string_view label) {
  SentencePieceProtoInfo info;
  Wire w(serialized, label);
  while (!w.done()) {
    const uint64_t tag = w.varint();
    const uint64_t field = tag >> 3;
    const auto type = static_cast<uint32_t>(tag & 7);
    if (type == kBytes && field == 1) {
      info.piece_types.push_back(piece_type(w.take(w.varint()), label));
    } else if (type == kBytes && field == 3) {
      info.add_dummy_prefix = add_dummy_prefix(w.take(w.varint()), label);
    } else {
      w.skip(type);
    }
  }
  return info;
}

}  // namespace zaya
