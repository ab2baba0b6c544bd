#pragma once
// Generation and scoring by full-sequence forward passes (no KV cache): each
// new token re-runs the model over the whole prefix. Simple and exact; the
// cached decoder is the [infer] issue's job.

#include <cstdint>
#include <functional>
#include <vector>

#include "zaya/infer/sampling.h"
#include "zaya/model/model.h"

namespace zaya {

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
};

// Returns the generated ids (prompt excluded). on_token(id) is called as each
// token is chosen (streaming); return false from it to stop early.
std::vector<int32_t> generate_full_sequence(const ZayaModel& model, const std::vector<int32_t>& prompt,
                                            const GenerateOptions& options,
                                            const std::function<bool(int32_t)>& on_token = {});

struct SequenceScore {
  double mean_loss = 0;       // mean next-token cross-entropy over positions 1..n-1 (nats)
  int64_t tokens = 0;         // scored positions (n - 1)
  std::vector<float> logits;  // [n, real_vocab] if requested
};

// Scores each token-id list: the loss of predicting token i+1 from tokens 0..i.
std::vector<SequenceScore> score_sequences(const ZayaModel& model, const std::vector<std::vector<int32_t>>& seqs,
                                           bool keep_logits);

}  // namespace zaya
