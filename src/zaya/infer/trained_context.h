#pragma once
// The sequence length a model was trained at, where its files say it: a
// training checkpoint records its training config (metadata.json "config"),
// and a run's final/ model directory sits beside the run's config.toml. A
// model evaluated past it scores positions it never saw in training, so
// `zaya eval` says so (red-team M6: a default window of 1,024 on a model
// trained at 128 gave 4.02 nats where training's validation said 3.19).
// Best effort: an unknown length (a GGUF file, an exported or downloaded
// directory, an unreadable config) is nullopt, never an error.

#include <cstdint>
#include <optional>
#include <string>

namespace zaya {

struct TrainedContext {
  int64_t seq_len = 0;  // the longest training sequence (over a recipe's phases)
  std::string source;   // where it was read, for messages: "runs/tiny/config.toml"
};

// From the resolved training config's TOML text: train.seq_len, or the
// largest [[phase]] seq_len of a recipe; nullopt when neither is there or
// the text is not TOML.
std::optional<int64_t> trained_seq_len_from_toml(const std::string& toml_text);

// For what `InferModel::open` reads: a checkpoint directory (metadata.json),
// or a model directory named final whose parent holds config.toml (a run).
std::optional<TrainedContext> trained_context(const std::string& model_path);

// The note `zaya eval` prints when its perplexity window (`context` tokens,
// set by `flag`) is longer than the model was trained at; empty otherwise.
std::string context_note(int64_t context, const std::string& flag, const std::optional<TrainedContext>& trained);

}  // namespace zaya
