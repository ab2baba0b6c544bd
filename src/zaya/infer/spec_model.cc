#include "zaya/infer/spec_model.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "zaya/core/error.h"
#include "zaya/infer/sampling.h"
#include "zaya/infer/text.h"

namespace zaya {
namespace {

// Two slots per target slot (the context, the scratch), the target's context
// (capped at the draft's positions), its step budget and bf16 setting.
EngineOptions draft_engine_options(const InferModel& draft, const InferenceEngine& target) {
  EngineOptions o;
  o.max_sequences = 2 * target.max_sequences();
  o.max_context = std::min(target.max_context(), draft.config().max_position);
  o.max_step_tokens = std::max(target.max_step_tokens(), o.max_sequences);
  o.bf16_activations = target.options().bf16_activations;
  return o;
}

}  // namespace

ModelDrafter::ModelDrafter(const InferModel& draft, const InferenceEngine& target, int64_t sample_vocab)
    : engine_(draft, draft_engine_options(draft, target)),
      slots_(target.max_sequences()),
      target_vocab_(target.config().vocab_size),
      sample_vocab_(sample_vocab) {
  ZAYA_CHECK(sample_vocab >= 1 && sample_vocab <= draft.config().real_vocab_size &&
                 sample_vocab <= target.config().real_vocab_size,
             "the draft model's vocabulary ({} ids) does not hold the {} ids the target samples",
             draft.config().real_vocab_size, sample_vocab);
  // A step's logit rows: one per chunk with logits, at most one chunk per slot.
  logits_.resize(size_t(engine_.max_sequences() * engine_.config().vocab_size));
}

void ModelDrafter::start(int32_t slot) {
  engine_.reset(slot);
  engine_.reset(int32_t(slots_ + slot));
}

void ModelDrafter::draw(const DraftJob& j, const float* row) {
  sampling_distribution(row, sample_vocab_, *j.sampling, dist_);
  // As sample_token draws (one uniform over the distribution); the argmax alone, without a draw, when greedy.
  int32_t d = dist_.front().second;
  if (dist_.size() > 1) {
    double u = j.rng->next_double();
    for (const auto& [p, id] : dist_) {
      d = id;
      if ((u -= double(p)) < 0) break;
    }
  }
  const size_t at = j.q->size();
  j.q->resize(at + size_t(target_vocab_), 0.0f);
  for (const auto& [p, id] : dist_) (*j.q)[at + size_t(id)] = p;
  j.tokens->push_back(d);
}

void ModelDrafter::step_and_draw(std::span<const DraftJob> jobs) {
  engine_.step(chunks_);
  const int64_t rows = engine_.logit_rows(), V = engine_.config().vocab_size;
  if (rows == 0) return;
  engine_.logits(0, rows, logits_.data());
  for (int64_t r = 0; r < rows; ++r)
    draw(jobs[job_of_chunk_[size_t(engine_.logit_row_chunk(r))]], logits_.data() + r * V);
}

void ModelDrafter::draft(std::span<const DraftJob> jobs) {
  const int64_t context_max = engine_.max_context();
  fed_.assign(jobs.size(), 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const DraftJob& j = jobs[i];
    ZAYA_ASSERT(j.slot >= 0 && j.slot < slots_ && j.max_tokens >= 1 && !j.context.empty());
    j.tokens->clear();
    j.q->clear();
    j.tokens->reserve(size_t(j.max_tokens));  // chunks point at its tokens while it grows
    const int64_t n = int64_t(j.context.size());
    // The slot holds a prefix of the context (what the target emitted); the draft model's positions end drafting.
    if (engine_.length(j.slot) >= n) engine_.reset(j.slot);
    fed_[i] = n > context_max ? n : engine_.length(j.slot);
  }
  // Catch-up: each slot takes the context it has not seen, in steps of at most the budget; the chunk
  // that reaches the context's end gives the first draft token.
  while (true) {
    chunks_.clear();
    job_of_chunk_.clear();
    int64_t budget = engine_.max_step_tokens();
    for (size_t i = 0; i < jobs.size() && budget > 0; ++i) {
      const int64_t n = int64_t(jobs[i].context.size());
      if (fed_[i] >= n) continue;
      const int64_t take = std::min(n - fed_[i], budget);
      chunks_.push_back({jobs[i].slot, jobs[i].context.data() + fed_[i], take,
                         fed_[i] + take == n ? LogitsWanted::kLast : LogitsWanted::kNone});
      job_of_chunk_.push_back(i);
      fed_[i] += take;
      budget -= take;
    }
    if (chunks_.empty()) break;
    step_and_draw(jobs);
  }
  // Tokens 2 .. K: each draft token fed to the scratch copy, one step for every sequence still drafting.
  auto wanted = [&](const DraftJob& j) { return std::min(j.max_tokens, context_max - int64_t(j.context.size()) + 1); };
  for (const DraftJob& j : jobs)
    if (j.tokens->size() == 1 && wanted(j) > 1) engine_.copy(j.slot, int32_t(slots_ + j.slot));
  for (size_t t = 1;; ++t) {
    chunks_.clear();
    job_of_chunk_.clear();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const DraftJob& j = jobs[i];
      if (j.tokens->size() != t || int64_t(t) >= wanted(j)) continue;
      chunks_.push_back({int32_t(slots_ + j.slot), &j.tokens->back(), 1, LogitsWanted::kLast});
      job_of_chunk_.push_back(i);
    }
    if (chunks_.empty()) break;
    step_and_draw(jobs);
  }
  for (const DraftJob& j : jobs)
    if (engine_.length(int32_t(slots_ + j.slot)) > 0) engine_.reset(int32_t(slots_ + j.slot));
}

void check_draft_model(const InferModel& target, const std::string& target_label, const Tokenizer& target_tok,
                       const InferModel& draft, const std::string& draft_label, const Tokenizer* draft_tok,
                       int64_t sample_vocab) {
  const ZayaConfig &t = target.config(), &d = draft.config();
  if (draft_tok != nullptr) {
    ZAYA_CHECK(draft_tok->vocab_size() == target_tok.vocab_size(),
               "--spec-model {}: its tokenizer ({}) has {} pieces, the target {}'s ({}) has {}; a draft model must "
               "use the target's tokenizer",
               draft_label, draft_tok->model_path(), draft_tok->vocab_size(), target_label, target_tok.model_path(),
               target_tok.vocab_size());
    if (draft_tok->serialized() != target_tok.serialized())
      for (int32_t id = 0; id < target_tok.vocab_size(); ++id) {
        const std::string a = draft_tok->id_to_piece(id), b = target_tok.id_to_piece(id);
        ZAYA_CHECK(a == b,
                   "--spec-model {}: its tokenizer ({}) differs from the target {}'s ({}): id {} is '{}' in the "
                   "draft's and '{}' in the target's; a draft model must use the target's tokenizer",
                   draft_label, draft_tok->model_path(), target_label, target_tok.model_path(), id, a, b);
      }
    ZAYA_CHECK(draft_tok->bos_id() == target_tok.bos_id() && draft_tok->eos_id() == target_tok.eos_id(),
               "--spec-model {}: its tokenizer's BOS / EOS ids ({} / {}) differ from the target {}'s ({} / {})",
               draft_label, draft_tok->bos_id(), draft_tok->eos_id(), target_label, target_tok.bos_id(),
               target_tok.eos_id());
  } else {
    ZAYA_CHECK(
        d.real_vocab_size == t.real_vocab_size && d.bos_token_id == t.bos_token_id && d.eos_token_id == t.eos_token_id,
        "--spec-model {}: it has no tokenizer of its own (tokenizer.model), and its vocabulary ({} ids, BOS {}, "
        "EOS {}) differs from the target {}'s ({} ids, BOS {}, EOS {}); a draft model must use the target's "
        "tokenizer",
        draft_label, d.real_vocab_size, d.bos_token_id, d.eos_token_id, target_label, t.real_vocab_size, t.bos_token_id,
        t.eos_token_id);
  }
  ZAYA_CHECK(d.real_vocab_size >= sample_vocab,
             "--spec-model {}: its vocabulary has {} ids (real_vocab_size), fewer than the {} the target {} samples",
             draft_label, d.real_vocab_size, sample_vocab, target_label);
}

std::unique_ptr<InferModel> open_draft_model(const std::string& dir, const InferLoadOptions& options,
                                             const InferModel& target, const std::string& target_label,
                                             const Tokenizer& target_tokenizer, int64_t sample_vocab) {
  std::error_code ec;
  ZAYA_CHECK(std::filesystem::exists(dir, ec),
             "--spec-model {}: no such file or directory (the draft model: a model directory, training checkpoint or "
             ".gguf file with the target {}'s tokenizer)",
             dir, target_label);
  std::unique_ptr<InferModel> draft;
  std::optional<Tokenizer> tok;
  try {
    draft = InferModel::open(dir, options);
    tok = load_tokenizer_if_present(dir, "", draft->tokenizer_hint());
    if (tok) check_tokenizer(*tok, draft->config(), dir);
  } catch (const Error& e) {
    fail("--spec-model {}: {}", dir, e.what());
  }
  check_draft_model(target, target_label, target_tokenizer, *draft, dir, tok ? &*tok : nullptr, sample_vocab);
  return draft;
}

std::unique_ptr<InferModel> open_spec_model_flag(SpecOptions& spec, const std::string& dir,
                                                 const InferLoadOptions& options, const InferModel& target,
                                                 const std::string& target_label, const Tokenizer& target_tokenizer,
                                                 int64_t sample_vocab) {
  std::unique_ptr<InferModel> draft;
  if (!dir.empty()) {
    ZAYA_CHECK_USAGE(spec.method == SpecMethod::kNone || spec.method == SpecMethod::kModel,
                     "--spec-model drafts with a model; it cannot be combined with --spec {}",
                     spec_method_name(spec.method));
    InferLoadOptions lo = options;
    lo.lora.clear();  // an adapter is the target's
    draft = open_draft_model(dir, lo, target, target_label, target_tokenizer, sample_vocab);
    spec.method = SpecMethod::kModel;
  }
  spec.draft_model = draft.get();
  spec.validate();
  return draft;
}

}  // namespace zaya
