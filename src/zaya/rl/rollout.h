#pragma once
// The rollouts of an RL step (docs/rl.md): G samples of each prompt from the
// cached decoder (infer/generator.h: continuous batching, the scheduler's
// admission and finish rule), with stop ids, stop strings (checked on the
// decoded text as each token arrives: the sample ends at the token that
// completes one) and the decoder's own log-probability of every sampled
// token (GeneratorOptions::logprobs), and the experts it routed each fed
// token to (GeneratorOptions::routing).

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/infer_model.h"
#include "zaya/rl/prompt_set.h"

namespace zaya {

struct RolloutSettings {
  SamplingOptions sampling;  // its seed is replaced per sample (below)
  int64_t max_new_tokens = 32;
  std::vector<int32_t> stop_ids;
  std::vector<std::string> stop_strings;
  bool bf16_activations = true;
};

struct RolloutSample {
  const RlPrompt* prompt = nullptr;
  std::vector<int32_t> tokens;  // generated ids (the stop id or the token completing a stop string included)
  std::vector<float> logprobs;  // the decoder's log p of each
  // The decoder's expert choices for each token it fed, the prompt's then the completion's but the last,
  // [fed tokens, MoE blocks, top_k] (GenerationResult::routing): the record routing replay uses (docs/rl.md).
  std::vector<int32_t> routing;
  std::string text;  // decoded, cut before the first stop string
};

struct RolloutStats {
  int64_t generated_tokens = 0;
  double seconds = 0;
  // The cached decoder's split (GenerationStats; 0 with rl.sample_with_trainer): the prompt tokens it prefilled,
  // and the tokens and seconds of its decode-only steps (no prompt tokens in them: what `zaya bench infer` times).
  int64_t prompt_tokens = 0;
  int64_t decode_tokens = 0;
  double decode_seconds = 0;
};

// `group` samples of each prompt, prompt-major; sample k of the call draws
// from sampling seed `seed + k` (sampling_rng), so a step's samples are a
// function of (seed, prompts) alone. `generator`: one a run keeps from step
// to step, so that the decoder's engine is built once (infer/generator.h
// Generator; the samples are the same with or without it); null: a new one.
// `screen`: likewise a StopScreen for `settings.stop_strings` kept from step
// to step (its answers are per id); null: a new one.
class StopScreen;
std::vector<RolloutSample> run_rollout(const InferModel& model, const Tokenizer& tokenizer,
                                       const std::vector<const RlPrompt*>& prompts, int64_t group,
                                       const RolloutSettings& settings, uint64_t seed, RolloutStats* stats = nullptr,
                                       Generator* generator = nullptr, StopScreen* screen = nullptr);

// Whether the decoded `tokens` hold one of `stops` (the sample ends at the token that completes one).
bool completes_stop(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens,
                    const std::vector<std::string>& stops);
// Whether `text` holds one of `stops` (empty ones excepted).
bool holds_stop(const std::string& text, const std::vector<std::string>& stops);

// Which tokens can complete a stop string, so that completes_stop need not
// decode a sample's tokens until one of them has come: a token whose own
// decoded text holds the last byte of one of `stops`, a byte piece or the
// unknown piece (their bytes join their neighbours'), and every token when a
// stop string ends in a space (decoding one piece alone may drop a leading
// space). A decoded text holds a byte only where one of its tokens put it
// there (SentencePiece decodes a normal piece to its own text, a control
// piece to nothing), so a stop string first appears in the text at such a
// token (the one that put its last byte there): the rollout decodes a sample
// only as one arrives. stop_screen_test.cc checks that on random samples.
// Answers are cached per id.
class StopScreen {
 public:
  StopScreen(const Tokenizer& tokenizer, const std::vector<std::string>& stops);
  bool may_end(int32_t id);
  // tokenizer.decode(ids), exactly, without SentencePiece where it can: when every id is a normal piece, the
  // text is the first piece's own text (decode({id}), SentencePiece's leading space dropped there) followed by
  // each later piece's text after a normal piece (decode({anchor, id}) less decode({anchor})), both taken from
  // the tokenizer once per id. SentencePiece decodes a normal piece to its text alone, dropping a leading space
  // only while the text is still empty, so such a sequence's text is that concatenation; a first piece whose
  // text is empty (a lone space), and any other piece type (byte pieces join their neighbours', unknown, control,
  // user-defined pieces), go to the tokenizer's decode. stop_screen_test.cc checks the two texts equal on random
  // id sequences of every piece type. The reference is valid until the next call.
  const std::string& decode(const std::vector<int32_t>& ids);

 private:
  bool tabled(int32_t id);  // a normal piece whose texts are in the table (looked up once per id)

  const Tokenizer& tokenizer_;
  std::vector<int8_t> table_state_;  // per id: 0 not yet looked up, 1 tabled, 2 decoded by the tokenizer
  std::vector<std::string> first_text_, next_text_;  // per tabled id: its text first in a sequence, and later
  int32_t anchor_ = -2;                              // a normal piece with a non-empty text (-1: none; -2: unset)
  std::string anchor_text_, text_;
  std::string last_bytes_;     // each stop string's last byte
  bool every_token_ = false;   // a stop string ends in a space
  std::vector<int8_t> known_;  // per id: -1 not yet asked, else the answer
};

// The text before the first of `stops` in `text` (the earliest start), or all of it.
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stops);

}  // namespace zaya
