#pragma once
// Drafting with a smaller model (docs/inference.md, "Speculative decoding";
// `--spec-model DIR`): a ZAYA model with the target's tokenizer proposes the
// next K tokens of each sequence, greedily or by sampling as the sequence
// samples (its q rows then go to the rejection rule, spec_verify.h), in its
// own cached decoder (engine.h) with two slots per target slot:
//
// - slot s holds only tokens the target has emitted (the sequence's context),
//   never a draft: before a draft it catches up with the context it has not
//   seen (the tokens accepted since its last draft and the one after them; the
//   prompt the first time, in chunks of the step budget), whose last row gives
//   the first draft token;
// - slot S + s is the scratch: a copy of slot s (engine copy(): its full pages
//   shared, the partial one copied) that takes draft tokens 1 .. K-1 one step
//   each to give tokens 2 .. K, and is emptied after the draft.
// So a rejected draft leaves nothing in the state the next draft starts from:
// no rollback is needed, the tokens kept are fed once more in the next
// catch-up (one row each, in a step that runs anyway). Every step is batched
// over the sequences that draft at once.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/spec_decode.h"
#include "zaya/infer/spec_draft.h"

namespace zaya {

class ModelDrafter final : public Drafter {
 public:
  // For the slots of `target` (its max_sequences and max_context, its step
  // budget and bf16 setting); ids >= sample_vocab are never drafted, and q rows
  // have the target's vocabulary as their stride.
  ModelDrafter(const InferModel& draft, const InferenceEngine& target, int64_t sample_vocab);
  void start(int32_t slot) override;
  void draft(std::span<const DraftJob> jobs) override;
  // The draft model's cached decoder (tests: slot s holds the context, S + s the scratch).
  const InferenceEngine& engine() const { return engine_; }

 private:
  // Draws the job's next draft token from a logit row of the draft model and records its distribution.
  void draw(const DraftJob& job, const float* row);
  // Runs chunks_ and draws a token for each chunk with logits (jobs_of_chunk_: its job).
  void step_and_draw(std::span<const DraftJob> jobs);

  InferenceEngine engine_;
  int64_t slots_, target_vocab_, sample_vocab_;
  std::vector<float> logits_;
  std::vector<StepChunk> chunks_;
  std::vector<size_t> job_of_chunk_;
  std::vector<int64_t> fed_;
  std::vector<std::pair<float, int32_t>> dist_;
};

// Fails, naming both models and the mismatch, when `draft` cannot draft for
// `target`: their tokenizers differ (piece count, a piece, BOS or EOS), or,
// when the draft has no tokenizer of its own, their configs' real vocabularies
// or BOS / EOS ids differ; or the draft has fewer real vocabulary rows than the
// ids the target samples (sample_vocab).
void check_draft_model(const InferModel& target, const std::string& target_label, const Tokenizer& target_tokenizer,
                       const InferModel& draft, const std::string& draft_label, const Tokenizer* draft_tokenizer,
                       int64_t sample_vocab);

// `--spec-model DIR`: opens the draft model (a model directory, checkpoint or
// GGUF file, as --model; loaded as `options` say) and its tokenizer when it has
// one, and checks it against the target (check_draft_model). Errors name the
// flag and DIR.
std::unique_ptr<InferModel> open_draft_model(const std::string& dir, const InferLoadOptions& options,
                                             const InferModel& target, const std::string& target_label,
                                             const Tokenizer& target_tokenizer, int64_t sample_vocab);

// A command's --spec (already in spec.method) and --spec-model DIR (zaya
// generate, zaya serve): with DIR the method is `model` (--spec none or model;
// another fails) and the draft model is opened and checked (open_draft_model);
// spec.draft_model points at the returned model (null without DIR). Then
// spec.validate() (`--spec model` without DIR fails there).
std::unique_ptr<InferModel> open_spec_model_flag(SpecOptions& spec, const std::string& dir,
                                                 const InferLoadOptions& options, const InferModel& target,
                                                 const std::string& target_label, const Tokenizer& target_tokenizer,
                                                 int64_t sample_vocab);

}  // namespace zaya
