#pragma once
// What a serialized SentencePiece model (ModelProto, sentencepiece_model.proto)
// holds that SentencePieceProcessor's API does not tell: the type of every
// piece (it has IsControl, IsUnknown, IsUnused and IsByte, but no user-defined
// test) and the normaliser's add_dummy_prefix. A minimal decoder of the
// protobuf wire format, reading only
//
//   ModelProto      { repeated SentencePiece pieces = 1; NormalizerSpec normalizer_spec = 3; ... }
//   SentencePiece   { string piece = 1; float score = 2; Type type = 3 [default NORMAL]; }
//   NormalizerSpec  { ...; bool add_dummy_prefix = 3 [default true]; ... }
//
// and skipping every other field. Bounds-checked: malformed bytes are a zaya::Error.

#include <cstdint>
#include <string_view>
#include <vector>

namespace zaya {

struct SentencePieceProtoInfo {
  // One per piece, SentencePiece's enum: 1 normal, 2 unknown, 3 control,
  // 4 user-defined, 5 unused, 6 byte (llama.cpp's token types are the same numbers).
  std::vector<int32_t> piece_types;
  bool add_dummy_prefix = true;
};

// `label` names the model in errors.
SentencePieceProtoInfo decode_sentencepiece_proto(std::string_view serialized, std::string_view label);

}  // namespace zaya
