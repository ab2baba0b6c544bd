// Fuzz target: a whole GGUF file (io/gguf_parse.h), then every accessor on
// what the parser accepted, then the ZAYA mapping (formats/gguf_zaya_map.h) and
// the tokenizer keys (io/gguf_vocab.h) with the embedded SentencePiece
// model's wire format (data/sentencepiece_proto.h).
// Any exception other than zaya::Error, any sanitizer report and any broken
// invariant (__builtin_trap) is a finding.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/data/sentencepiece_proto.h"
#include "zaya/formats/gguf_zaya_map.h"
#include "zaya/io/gguf_parse.h"
#include "zaya/io/gguf_vocab.h"

namespace {

constexpr std::string_view kLabel = "fuzz.gguf";

template <typename F>
void expect_error_or_value(F&& f) {
  try {
    f();
  } catch (const zaya::Error&) {
  }
}

void exercise_metadata(const zaya::GgufMetadata& m) {
  for (const zaya::GgufKeyValue& kv : m.entries()) {
    if (m.find(kv.key) != &kv.value) __builtin_trap();  // the index points at the entry
    (void)kv.value.describe();
    std::string encoded;
    kv.value.encode(encoded);
    if (encoded.empty()) __builtin_trap();  // every value has at least one byte
    expect_error_or_value([&] { (void)m.get_uint(kv.key); });
    expect_error_or_value([&] { (void)m.get_int(kv.key); });
    expect_error_or_value([&] { (void)m.get_float(kv.key); });
    expect_error_or_value([&] { (void)m.get_bool(kv.key); });
    expect_error_or_value([&] { (void)m.get_string(kv.key); });
    if (kv.value.is_array() && kv.value.size() > 0) {
      (void)kv.value.element(0);
      (void)kv.value.element(kv.value.size() - 1);
      expect_error_or_value([&] { (void)kv.value.element(kv.value.size()); });
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const zaya::GgufLayout layout = zaya::parse_gguf_layout(kLabel, std::span<const uint8_t>(data, size));
    if (layout.data_size > size || (layout.data_size > 0 && layout.data_offset + layout.data_size != size))
      __builtin_trap();
    exercise_metadata(layout.metadata);
    std::vector<float> values;
    for (const zaya::GgufTensorInfo& t : layout.tensors) {
      // The parser's promises: aligned, in range, sized by shape and type.
      if (t.offset % layout.alignment != 0 || t.offset > layout.data_size || t.nbytes > layout.data_size - t.offset)
        __builtin_trap();
      if (t.nbytes != static_cast<uint64_t>(t.numel) * zaya::ggml_type_size(t.type)) __builtin_trap();
      if (!zaya::ggml_type_is_float(t.type)) continue;
      values.resize(static_cast<size_t>(t.numel));
      zaya::gguf_convert_to_f32(kLabel, t.name, t.type,
                                std::span<const uint8_t>(data + layout.data_offset + t.offset, t.nbytes), values.data(),
                                static_cast<uint64_t>(t.numel));
    }
    // The ZAYA view of the same file: config from metadata, then the tensor set.
    expect_error_or_value([&] {
      const zaya::ZayaConfig config = zaya::zaya_config_from_gguf(layout.metadata);
      zaya::check_zaya_gguf_tensors(kLabel, zaya::zaya_gguf_tensor_map(config), layout.tensors);
    });
    // The vocabulary: its promises, then the embedded model's protobuf wire format.
    expect_error_or_value([&] {
      const std::optional<zaya::GgufVocab> vocab = zaya::read_gguf_vocab(layout.metadata);
      if (!vocab) return;
      if (!vocab->scores.empty() && vocab->scores.size() != vocab->tokens.size()) __builtin_trap();
      if (!vocab->token_types.empty() && vocab->token_types.size() != vocab->tokens.size()) __builtin_trap();
      if (vocab->unknown_id >= static_cast<int64_t>(vocab->tokens.size())) __builtin_trap();
      (void)zaya::gguf_vocab_metadata(*vocab);  // what was read can be written again
      if (!vocab->sentencepiece_model.empty())
        (void)zaya::decode_sentencepiece_proto(vocab->sentencepiece_model, kLabel);
    });
  } catch (const zaya::Error&) {
  }
  return 0;
}
