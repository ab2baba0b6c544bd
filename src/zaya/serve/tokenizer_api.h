#pragma once
// The server's tokenizer endpoints, as vLLM names and shapes them and as
// lm-evaluation-harness's remote tokenizer backend (lm_eval.utils.RemoteTokenizer,
// `tokenizer_backend=remote`, chosen by `local-completions` on its own when
// /tokenizer_info and /tokenize answer) calls them, so that a model with a
// zaya-trained SentencePiece tokenizer needs no Hugging Face tokenizer:
//
//   POST /tokenize        {"prompt", "add_special_tokens", "return_token_strs"}
//                         -> {"count", "max_model_len", "tokens"[, "token_strs"]}
//   POST /detokenize      {"tokens"} -> {"prompt"}
//   GET  /tokenizer_info  -> {"tokenizer_class", "bos_token", "eos_token",
//                             "pad_token", "unk_token", their ids, "vocab_size",
//                             "model_max_length", "add_bos_token"}
//
// Special-token text is one id, as Hugging Face's tokenizers split text at
// their special tokens: the text of every control piece (<bos>, <eos>, <pad>,
// Gemma 3's <start_of_turn>, ...) and of the unknown piece becomes that id,
// and the text between them is encoded on its own. The harness relies on it:
// it learns the EOS and BOS ids as the first id of /tokenize("<eos>") and
// /tokenize("<bos>"), and a task that wants BOS first (as `zaya eval`'s
// multiple-choice items have it) writes "<bos>" into its prompt.
// add_special_tokens (vLLM's default true) puts BOS first, as a completions
// text prompt gets it. docs/serve.md, "Tokenizer endpoints".

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/serve/openai_request.h"
#include "zaya/serve/openai_response.h"

namespace zaya {

// Encodes text with special-token text as single ids. Built once per tokenizer
// (a pass over its pieces); encode() looks up at most one hash per distinct
// special-token length at each byte that can start one, so hostile text
// costs time linear in its length.
class SpecialTokenEncoder {
 public:
  explicit SpecialTokenEncoder(const Tokenizer& tokenizer);
  std::vector<int32_t> encode(std::string_view text) const;
  // The special tokens' texts and ids (control and unknown pieces), by id.
  const std::vector<std::pair<std::string, int32_t>>& specials() const { return specials_; }

 private:
  const Tokenizer& tok_;
  std::vector<std::pair<std::string, int32_t>> specials_;
  std::unordered_map<std::string, int32_t> by_text_;
  std::vector<size_t> lengths_;  // distinct lengths, longest first
  bool starts_[256] = {};        // bytes that start some special token
};

// The answers; a request's problem (or an id outside the vocabulary) is a 400 the caller sends.
ojson tokenize_response(const Tokenizer& tokenizer, const SpecialTokenEncoder& encoder, const TokenizeRequest& r,
                        int64_t context);
// "" when every id is in the tokenizer's vocabulary, else why not (param "tokens").
std::string detokenize_error(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens);
ojson detokenize_response(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens);
ojson tokenizer_info(const Tokenizer& tokenizer, int64_t context);

}  // namespace zaya
