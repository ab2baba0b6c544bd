#include "zaya/infer/sequence_scores.h"

#include <fmt/format.h>

#include <fstream>

#include "zaya/core/error.h"
#include "zaya/infer/scorer.h"
#include "zaya/io/atomic_file.h"

namespace zaya {

std::vector<SequenceScore> score_sequences_cached(const InferModel& model,
                                                  const std::vector<std::vector<int32_t>>& seqs,
                                                  const std::string& label) {
  std::vector<ScoreGroup> groups;
  for (size_t i = 0; i < seqs.size(); ++i) {
    ZAYA_CHECK(seqs[i].size() >= 2, "{}: sequence {} has {} tokens; scoring needs at least 2", label, i,
               seqs[i].size());
    groups.push_back({{seqs[i][0]}, {std::vector<int32_t>(seqs[i].begin() + 1, seqs[i].end())}, {}});
  }
  ScorerOptions so;
  so.bf16_activations = false;  // f32 activations: the numbers of the full-sequence forward
  std::vector<SequenceScore> scores;
  for (const auto& g : score_groups(model, groups, so)) {
    SequenceScore sc;
    sc.tokens = g[0].tokens;
    sc.mean_loss = -g[0].logprob / double(g[0].tokens);
    scores.push_back(std::move(sc));
  }
  return scores;
}

void write_logits_json(const std::string& path, const std::vector<SequenceScore>& scores, int64_t V) {
  AtomicFileWriter f(path);  // a dump of every logit can be large: streamed, then published whole
  f.write("[");
  for (size_t i = 0; i < scores.size(); ++i) {
    f.write(i ? ",\n[" : "[");
    const std::vector<float>& logits = scores[i].logits;
    ZAYA_CHECK(V > 0 && !logits.empty() && int64_t(logits.size()) % V == 0,
               "{}: sequence {} has {} logits, not rows of {} ids (scored without keep_logits?)", path, i,
               logits.size(), V);
    const int64_t S = int64_t(logits.size()) / V;
    std::string row;
    for (int64_t t = 0; t < S; ++t) {
      row = t ? ",[" : "[";
      for (int64_t v = 0; v < V; ++v) row += fmt::format("{}{:.7g}", v ? "," : "", logits[t * V + v]);
      row += "]";
      f.write(row);
    }
    f.write("]");
  }
  f.write("]\n");
  f.commit();
}

}  // namespace zaya
