#include "zaya/io/gguf_vocab.h"

#include <fmt/format.h>

#include <cstring>

#include "zaya/core/error.h"

namespace zaya {

std::vector<GgufKeyValue> gguf_vocab_metadata(const GgufVocab& v) {
  ZAYA_CHECK(v.scores.empty() || v.scores.size() == v.tokens.size(), "GGUF vocabulary: {} scores for {} tokens",
             v.scores.size(), v.tokens.size());
  ZAYA_CHECK(v.token_types.empty() || v.token_types.size() == v.tokens.size(),
             "GGUF vocabulary: {} token types for {} tokens", v.token_types.size(), v.tokens.size());
  ZAYA_CHECK(v.unknown_id < int64_t(v.tokens.size()), "GGUF vocabulary: unknown id {} outside the {} tokens",
             v.unknown_id, v.tokens.size());
  std::vector<GgufKeyValue> out;
  out.push_back({kGgufTokenizerModelKey, GgufValue::string(v.model)});
  out.push_back({kGgufTokensKey, GgufValue::strings(v.tokens)});
  if (!v.scores.empty()) out.push_back({kGgufScoresKey, GgufValue::numbers<float>(v.scores)});
  if (!v.token_types.empty()) out.push_back({kGgufTokenTypeKey, GgufValue::numbers<int32_t>(v.token_types)});
  if (v.unknown_id >= 0) out.push_back({kGgufUnknownIdKey, GgufValue::u32(static_cast<uint32_t>(v.unknown_id))});
  if (v.add_bos) out.push_back({kGgufAddBosKey, GgufValue::boolean(*v.add_bos)});
  if (v.add_eos) out.push_back({kGgufAddEosKey, GgufValue::boolean(*v.add_eos)});
  if (v.add_space_prefix) out.push_back({kGgufAddSpacePrefixKey, GgufValue::boolean(*v.add_space_prefix)});
  if (!v.sentencepiece_model.empty()) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.sentencepiece_model.data());
    out.push_back({kZayaSentencePieceModelKey,
                   GgufValue::numbers<uint8_t>(std::span<const uint8_t>(p, v.sentencepiece_model.size()))});
  }
  return out;
}

std::optional<GgufVocab> read_gguf_vocab(const GgufMetadata& m) {
  if (!m.has(kGgufTokensKey) && !m.has(kZayaSentencePieceModelKey)) return std::nullopt;
  GgufVocab v;
  v.model = m.has(kGgufTokenizerModelKey) ? m.get_string(kGgufTokenizerModelKey) : std::string();
  if (m.has(kGgufTokensKey)) v.tokens = m.get_array(kGgufTokensKey, GgufType::kString).string_elements();
  const uint64_t n = v.tokens.size();
  auto same_length = [&](const char* key, const GgufValue& a) {
    if (a.size() != n)
      fail("{}: metadata key '{}' has {} elements, but '{}' has {} tokens", m.label(), key, a.size(), kGgufTokensKey,
           n);
  };
  if (m.has(kGgufScoresKey)) {
    const GgufValue& a = m.get_array(kGgufScoresKey, GgufType::kF32);
    same_length(kGgufScoresKey, a);
    v.scores.resize(n);
    if (n > 0) std::memcpy(v.scores.data(), a.packed_bytes().data(), n * sizeof(float));
  }
  if (m.has(kGgufTokenTypeKey)) {
    const GgufValue& a = m.get_array(kGgufTokenTypeKey, GgufType::kI32);
    same_length(kGgufTokenTypeKey, a);
    v.token_types.resize(n);
    if (n > 0) std::memcpy(v.token_types.data(), a.packed_bytes().data(), n * sizeof(int32_t));
    for (uint64_t i = 0; i < n; ++i)
      if (v.token_types[i] < 0 || v.token_types[i] > int32_t(GgufTokenType::kByte))
        fail("{}: metadata key '{}': element {} is {}, not a token type (0..6)", m.label(), kGgufTokenTypeKey, i,
             v.token_types[i]);
  }
  if (m.has(kGgufUnknownIdKey)) {
    const uint64_t id = m.get_uint(kGgufUnknownIdKey);
    if (id >= n) fail("{}: metadata key '{}' is {}, outside the {} tokens", m.label(), kGgufUnknownIdKey, id, n);
    v.unknown_id = static_cast<int64_t>(id);
  }
  if (m.has(kGgufAddBosKey)) v.add_bos = m.get_bool(kGgufAddBosKey);
  if (m.has(kGgufAddEosKey)) v.add_eos = m.get_bool(kGgufAddEosKey);
  if (m.has(kGgufAddSpacePrefixKey)) v.add_space_prefix = m.get_bool(kGgufAddSpacePrefixKey);
  if (m.has(kZayaSentencePieceModelKey)) {
    const std::span<const uint8_t> bytes = m.get_array(kZayaSentencePieceModelKey, GgufType::kU8).packed_bytes();
    if (bytes.empty())
      fail("{}: metadata key '{}' is empty (no SentencePiece model)", m.label(), kZayaSentencePieceModelKey);
    v.sentencepiece_model.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return v;
}

}  // namespace zaya
