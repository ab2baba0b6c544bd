#pragma once
// Multiple-choice evaluation by log-likelihood, as lm-evaluation-harness
// scores HellaSwag, ARC, PIQA, ...: each choice is a continuation of the
// item's context; the prediction is the choice with the highest summed log
// probability (acc), or the highest per-character log probability (acc_norm,
// the harness's length normalisation).
//
// JSONL schema, one item per line (docs/inference.md):
//   {"context": "The cat sat on the", "choices": [" mat", " moon"], "gold": 0}
//   {"context_ids": [2, 651, 4717], "choices_ids": [[5001], [88, 12]], "gold": 1}
// with an optional "id" (any JSON value, echoed in per-item output) and
// "meta" (ignored). Text items are tokenized as the harness does: trailing
// whitespace of the context moves to the front of each choice, the choice's
// tokens are those of encode(context + choice) after the encode(context)
// prefix, and BOS is prepended to the context. Token items are used as given
// (no BOS added); acc_norm then divides by the number of choice tokens.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/scorer.h"

namespace zaya {

struct McItem {
  nlohmann::json id;                          // null when absent
  std::vector<int32_t> context;               // scored prefix (with BOS for text items)
  std::vector<std::vector<int32_t>> choices;  // continuation tokens
  std::vector<double> choice_length;          // characters (text) or tokens (ids), for acc_norm
  int64_t gold = 0;
};

// Reads a JSONL file. `tokenizer` may be null when every item gives ids.
// Errors name the file, line and key.
std::vector<McItem> read_mc_items(const std::string& path, const Tokenizer* tokenizer, int64_t model_vocab,
                                  int64_t max_items = 0);

struct McItemResult {
  std::vector<double> logprob;  // per choice
  std::vector<bool> greedy;     // per choice: every token the argmax
  int64_t pred = 0, pred_norm = 0;
};

struct McSummary {
  int64_t items = 0;
  double acc = 0, acc_stderr = 0;
  double acc_norm = 0, acc_norm_stderr = 0;
  std::vector<McItemResult> per_item;
};

McSummary evaluate_multiple_choice(const InferModel& model, const std::vector<McItem>& items,
                                   const ScorerOptions& options,
                                   const std::function<void(size_t, size_t)>& progress = {});

// Index of the first maximum.
int64_t argmax_first(const std::vector<double>& v);

}  // namespace zaya
