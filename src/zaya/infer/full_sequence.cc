#include "zaya/infer/full_sequence.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

std::vector<int32_t> generate_full_sequence(const ZayaModel& model, const std::vector<int32_t>& prompt,
                                            const GenerateOptions& o, const std::function<bool(int32_t)>& on_token) {
  const ZayaConfig& c = model.config();
  o.sampling.validate();
  ZAYA_CHECK(!prompt.empty(), "the prompt is empty (it needs at least the BOS token)");
  const int64_t max_len = std::min<int64_t>(c.max_position, int64_t(prompt.size()) + o.max_new_tokens);
  ZAYA_CHECK(int64_t(prompt.size()) < max_len || o.max_new_tokens == 0,
             "the prompt ({} tokens) leaves no room under max_position_embeddings ({})", prompt.size(), c.max_position);
  ModelWorkspace ws(c, 1, max_len, false);
  if (model.lora() != nullptr) ws.enable_lora(c, model.lora()->config());
  std::vector<int32_t> ids = prompt, out;
  SamplingScratch scratch;
  Rng rng = sampling_rng(o.sampling.seed);
  while (int64_t(ids.size()) < max_len) {
    const int64_t S = int64_t(ids.size());
    model_forward(model, ws, ids.data(), nullptr, 1, S, {});
    const float* last = ws.logits() + (S - 1) * c.vocab_size;
    const int32_t next = sample_token(last, c.real_vocab_size, o.sampling, rng, scratch);
    ids.push_back(next);
    out.push_back(next);
    if (on_token && !on_token(next)) break;
    if (std::find(o.stop_ids.begin(), o.stop_ids.end(), next) != o.stop_ids.end()) break;
  }
  return out;
}

std::vector<SequenceScore> score_sequences(const ZayaModel& model, const std::vector<std::vector<int32_t>>& seqs,
                                           bool keep_logits) {
  const ZayaConfig& c = model.config();
  int64_t longest = 1;
  for (const auto& s : seqs) longest = std::max<int64_t>(longest, int64_t(s.size()));
  ZAYA_CHECK(longest <= c.max_position, "a sequence of {} tokens exceeds max_position_embeddings ({})", longest,
             c.max_position);
  ModelWorkspace ws(c, 1, longest, false);
  if (model.lora() != nullptr) ws.enable_lora(c, model.lora()->config());  // dropout stays off: evaluation
  std::vector<SequenceScore> scores;
  std::vector<int32_t> targets;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& s = seqs[i];
    ZAYA_CHECK(s.size() >= 2, "sequence {} has {} tokens; scoring needs at least 2", i, s.size());
    const int64_t S = int64_t(s.size());
    targets.assign(S, -1);
    for (int64_t t = 0; t + 1 < S; ++t) targets[t] = s[t + 1];
    LossParts parts = model_forward(model, ws, s.data(), targets.data(), 1, S, {});
    SequenceScore sc;
    sc.mean_loss = parts.xent_mean();
    sc.tokens = parts.xent_tokens;
    if (keep_logits) {
      sc.logits.resize(S * c.real_vocab_size);
      for (int64_t t = 0; t < S; ++t)
        std::copy(ws.logits() + t * c.vocab_size, ws.logits() + t * c.vocab_size + c.real_vocab_size,
                  sc.logits.begin() + t * c.real_vocab_size);
    }
    scores.push_back(std::move(sc));
  }
  return scores;
}

}  // namespace zaya
