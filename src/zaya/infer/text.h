#pragma once
// Text around the decoder: finding the tokenizer, checking that it fits a model, and
// turning a growing list of generated ids into printable text increments.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/model/config.h"

namespace zaya {

// Fails (naming the tokenizer file and the config fields) when the tokenizer
// does not fit the model: more pieces than embedding rows, or a BOS id that
// differs from the config's bos_token_id. Returns the ids that may be sampled:
// the tokenizer's pieces, never the padding rows beyond them (ZAYA1-base's
// 262,272 rows hold 262,144 Gemma 3 pieces, spec §7).
int64_t check_tokenizer(const Tokenizer& tokenizer, const ZayaConfig& config, const std::string& model_label);

// The tokenizer to use: `given`, else MODEL/tokenizer.model when it exists,
// else `hint` (the tokenizer a training checkpoint's config names) when set,
// else MODEL/tokenizer.model (whose absence the loader then reports).
std::string default_tokenizer_path(const std::string& model_dir, const std::string& given,
                                   const std::string& hint = "");

// The tokenizer of a command that needs one (zaya generate): the one at
// default_tokenizer_path; when none was given and the model has none, the
// error says how to give one (--tokenizer FILE, or a tokenizer.model beside
// the weights).
Tokenizer load_model_tokenizer(const std::string& model_dir, const std::string& given, const std::string& hint = "");

// For commands where only some inputs need a tokenizer (zaya eval: text does,
// token ids do not): the tokenizer at default_tokenizer_path, loaded when
// `given` is set (a missing file is then an error) or when that file exists
// (and, for a GGUF file, embeds a tokenizer); none otherwise.
std::optional<Tokenizer> load_tokenizer_if_present(const std::string& model_dir, const std::string& given,
                                                   const std::string& hint = "");

// Streams decoded text: push() returns what the new id adds to the text.
// Decoding the whole continuation each time (rather than piece by piece)
// keeps multi-byte characters and SentencePiece's space handling right; text
// is held back while it ends in an incomplete UTF-8 sequence.
class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  std::string push(int32_t id);
  // Whatever is still held back.
  std::string flush();
  const std::string& text() const { return shown_; }

 private:
  const Tokenizer& tok_;
  std::vector<int32_t> ids_;
  std::string shown_;
};

}  // namespace zaya
