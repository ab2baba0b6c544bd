#pragma once
// Constrained decoding: what a sequence may sample next, per step
// (docs/serve.md, "response_format"; docs/developer-guide.md, "The pieces of
// a decode"). A TokenConstraint belongs to one sequence; the serving loop
// (serving_loop.cc) asks it to mask a row of logits before sampling (the
// masked ids get -inf, so temperature, top-k and top-p see only the allowed
// ones) and tells it each token sampled. A request carries a factory, so that
// each of its n sequences gets a constraint of its own.
//
// json_constraint() is the one kind so far: the completion is one JSON value
// of a grammar (json_grammar.h), a stop id allowed only once the value is
// complete. It tests every token's text against the automaton by walking the
// vocabulary in byte order (tokens sharing a prefix share its steps, and a dead
// prefix skips every token under it) and caches the mask of each automaton
// state, so a state met again costs one lookup. Inside a string, where most of
// a vocabulary is allowed, the tokens of plain content are allowed by their
// character count alone and only the others (quotes, backslashes, broken
// UTF-8) are walked.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/json_grammar.h"

namespace zaya {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets logits[id] to -inf for every id in [0, vocab) that cannot come next.
  // Returns whether any id is left (none: the sequence must end here).
  virtual bool mask(float* logits, int64_t vocab) = 0;
  // Records the id sampled from a masked row.
  virtual void accept(int32_t id) = 0;
  // Whether the text so far is whole (ending here gives a valid output).
  virtual bool complete() const = 0;
};

using TokenConstraintFactory = std::function<std::unique_ptr<TokenConstraint>()>;

// The bytes each id adds to a decoded text (tokenizer.h: a normal piece with
// U+2581 as a space, a byte piece's byte; control, unknown, user-defined
// (chat markers, tool tags) and unused pieces count as none, so a text
// constraint never allows them), and whether the id decodes
// differently as a text's first token (SentencePiece drops a leading space there).
class TokenTexts {
 public:
  explicit TokenTexts(const Tokenizer& tokenizer);
  // For tests: the texts given, none changing at the start.
  explicit TokenTexts(std::vector<std::string> texts);

  int64_t size() const { return int64_t(texts_.size()); }
  const std::string& text(int32_t id) const { return texts_[size_t(id)]; }
  bool changes_at_start(int32_t id) const { return at_start_[size_t(id)]; }
  // Ids in byte order, and each one's common prefix with the one before.
  struct Order {
    std::vector<int32_t> ids, shared;
  };
  // Every id with text; those whose text is not plain string content.
  const Order& all() const { return all_; }
  const Order& special() const { return special_; }
  // The characters of an id whose text may stand inside a JSON string as it
  // is (whole UTF-8 characters, no '"', '\\' or control byte); -1 otherwise.
  int32_t plain_chars(int32_t id) const { return plain_[size_t(id)]; }
  size_t longest() const { return longest_; }

 private:
  void index();
  std::vector<std::string> texts_;
  std::vector<bool> at_start_;
  std::vector<int32_t> plain_;
  Order all_, special_;
  size_t longest_ = 0;
};

// The completion is one JSON value of `grammar`; the ids in `stop_ids` only
// once it is complete, and nothing after them.
TokenConstraintFactory json_constraint(std::shared_ptr<const JsonGrammar> grammar,
                                       std::shared_ptr<const TokenTexts> texts, std::vector<int32_t> stop_ids);

}  // namespace zaya
