#pragma once
// Whole-sequence scores for `zaya score`: the mean next-token loss of each
// token sequence with the cached decoder, the same numbers as the
// full-sequence forward's score_sequences (full_sequence.h), and the logits
// that score_sequences keeps, written as JSON.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/infer/full_sequence.h"
#include "zaya/infer/infer_model.h"

namespace zaya {

// Each sequence (>= 2 tokens; `label`, the input's name, is in the error
// otherwise) scored as its first token followed by the rest, with f32
// activations, so the losses are the full-sequence forward's. No logits.
std::vector<SequenceScore> score_sequences_cached(const InferModel& model,
                                                  const std::vector<std::vector<int32_t>>& sequences,
                                                  const std::string& label);

// Writes the logits of scores from score_sequences(..., keep_logits = true) as
// JSON [sequence][position][id] over ids [0, vocab), 7 significant digits.
void write_logits_json(const std::string& path, const std::vector<SequenceScore>& scores, int64_t vocab);

}  // namespace zaya
