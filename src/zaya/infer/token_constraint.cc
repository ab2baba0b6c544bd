#include "zaya/infer/token_constraint.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "zaya/core/error.h"

namespace zaya {

namespace {

// A piece's text in a decoded string (tokenizer.h's piece types).
std::string piece_text(const Tokenizer& tok, int32_t id) {
  const int32_t type = tok.piece_type(id);
  const std::string piece = tok.id_to_piece(id);
  if (type == 6) {  // a byte: "<0xHH>"
    if (piece.size() == 6 && piece.starts_with("<0x"))
      return std::string(1, char(std::stoi(piece.substr(3, 2), nullptr, 16)));
    return {};
  }
  if (type != 1) return {};  // control, unknown, user-defined (chat markers, tool tags) and unused: never text here
  static const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  std::string text;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpace.size(), kSpace) == 0) {
      text += ' ';
      i += kSpace.size();
    } else {
      text += piece[i++];
    }
  }
  return text;
}

}  // namespace

TokenTexts::TokenTexts(const Tokenizer& tok) {
  const int32_t n = tok.vocab_size();
  texts_.resize(size_t(n));
  at_start_.assign(size_t(n), false);
  for (int32_t id = 0; id < n; ++id) {
    texts_[size_t(id)] = piece_text(tok, id);
    if (texts_[size_t(id)].starts_with(' ')) at_start_[size_t(id)] = tok.decode(&id, 1) != texts_[size_t(id)];
  }
  index();
}

TokenTexts::TokenTexts(std::vector<std::string> texts) : texts_(std::move(texts)), at_start_(texts_.size(), false) {
  index();
}

namespace {

// The characters of `text` if it may stand inside a JSON string as it is (the
// automaton's rule, json_grammar.cc: whole well-formed UTF-8 characters, no
// '"', '\\' or byte below 0x20); -1 otherwise.
int32_t plain_string_chars(const std::string& text) {
  static const JsonGrammar g;
  JsonState s = json_step(g, json_start(g), '{');
  s = json_step(g, s, '"');  // inside a key of any object: a string of any content
  const std::string before = json_state_key(s);
  int32_t chars = 0;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') return -1;
    s = json_step(g, s, c);
    if (s.threads.empty()) return -1;
    chars += (c & 0xC0) != 0x80;
  }
  return json_state_key(s) == before ? chars : -1;  // (a character cut short leaves a continuation due)
}

TokenTexts::Order sorted_ids(const std::vector<std::string>& texts, const std::vector<int32_t>& ids) {
  TokenTexts::Order o;
  o.ids = ids;
  std::sort(o.ids.begin(), o.ids.end(), [&](int32_t a, int32_t b) {
    return texts[size_t(a)] < texts[size_t(b)] || (texts[size_t(a)] == texts[size_t(b)] && a < b);
  });
  o.shared.assign(o.ids.size(), 0);
  for (size_t i = 1; i < o.ids.size(); ++i) {
    const std::string &t = texts[size_t(o.ids[i])], &p = texts[size_t(o.ids[i - 1])];
    o.shared[i] = int32_t(std::mismatch(t.begin(), t.end(), p.begin(), p.end()).first - t.begin());
  }
  return o;
}

}  // namespace

void TokenTexts::index() {
  std::vector<int32_t> all, special;
  plain_.assign(texts_.size(), -1);
  for (int32_t id = 0; id < int32_t(texts_.size()); ++id) {
    const std::string& t = texts_[size_t(id)];
    if (t.empty()) continue;
    longest_ = std::max(longest_, t.size());
    all.push_back(id);
    plain_[size_t(id)] = plain_string_chars(t);
    if (plain_[size_t(id)] < 0) special.push_back(id);
  }
  all_ = sorted_ids(texts_, all);
  special_ = sorted_ids(texts_, special);
}

namespace {

// Masks by automaton state (and whether the token is the text's first), shared
// by the sequences of one request; the loop thread alone uses it.
struct MaskCache {
  static constexpr size_t kMaxEntries = 256;
  std::unordered_map<std::string, std::vector<uint64_t>> masks;
};

class JsonConstraint final : public TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonGrammar> g, std::shared_ptr<const TokenTexts> t, std::vector<int32_t> stops,
                 std::shared_ptr<MaskCache> cache)
      : g_(std::move(g)),
        texts_(std::move(t)),
        stops_(std::move(stops)),
        cache_(std::move(cache)),
        state_(json_start(*g_)) {}

  bool mask(float* logits, int64_t vocab) override {
    const std::vector<uint64_t>& allowed = allowed_ids();
    bool any = false;
    for (int64_t v = 0; v < vocab; ++v) {
      const bool ok = v < texts_->size() && (allowed[size_t(v) / 64] >> (v % 64) & 1);
      if (!ok) logits[v] = -std::numeric_limits<float>::infinity();
      any |= ok;
    }
    return any;
  }

  void accept(int32_t id) override {
    if (is_stop(id)) return;  // the end: nothing follows
    ZAYA_CHECK(id >= 0 && id < texts_->size() && !(first_ && texts_->changes_at_start(id)),
               "internal error: token {} was sampled outside the response_format's mask", id);
    for (unsigned char c : texts_->text(id)) {
      state_ = json_step(*g_, state_, c);
      ZAYA_CHECK(!state_.threads.empty(), "internal error: token {} was sampled outside the response_format's mask",
                 id);
    }
    first_ = false;
  }

  bool complete() const override { return json_complete(*g_, state_); }

 private:
  bool is_stop(int32_t id) const { return std::find(stops_.begin(), stops_.end(), id) != stops_.end(); }

  const std::vector<uint64_t>& allowed_ids() {
    std::string key = json_state_key(state_);
    key += first_ ? 'F' : 'N';
    if (auto it = cache_->masks.find(key); it != cache_->masks.end()) return it->second;
    if (cache_->masks.size() >= MaskCache::kMaxEntries) cache_->masks.clear();
    return cache_->masks[key] = compute();
  }

  // Every id whose text continues the state.
  std::vector<uint64_t> compute() const {
    const TokenTexts& t = *texts_;
    std::vector<uint64_t> bits(size_t(t.size() + 63) / 64, 0);
    // Inside a string, between characters: plain content by its length, the rest by the walk.
    if (const int64_t room = json_string_room(*g_, state_); room >= 0) {
      for (int32_t id = 0; id < int32_t(t.size()); ++id)
        if (t.plain_chars(id) >= 0 && t.plain_chars(id) <= room && usable(id))
          bits[size_t(id) / 64] |= uint64_t(1) << (id % 64);
      walk(t.special(), bits);
    } else {
      walk(t.all(), bits);
    }
    if (json_complete(*g_, state_))
      for (int32_t s : stops_)
        if (s >= 0 && s < t.size()) bits[size_t(s) / 64] |= uint64_t(1) << (s % 64);
    return bits;
  }

  bool usable(int32_t id) const { return !(first_ && texts_->changes_at_start(id)) && !is_stop(id); }

  // Sets the bit of every id of `order` whose text continues the state: a walk in byte order.
  void walk(const TokenTexts::Order& order, std::vector<uint64_t>& bits) const {
    const TokenTexts& t = *texts_;
    std::vector<JsonState> at(t.longest() + 1);  // at[k]: the state after the last walked text's first k bytes
    at[0] = state_;
    size_t valid = 0;     // at[0..valid] hold the last walked text's prefixes
    size_t dead_len = 0;  // > 0: the prefix of this length of the last walked text dies
    const std::vector<int32_t>& sorted = order.ids;
    for (size_t i = 0; i < sorted.size(); ++i) {
      const int32_t id = sorted[i];
      const size_t shared = size_t(order.shared[i]);
      valid = std::min(valid, shared);
      if (shared < dead_len) dead_len = 0;
      if (dead_len > 0 || !usable(id)) continue;
      const std::string& text = t.text(id);
      bool alive = true;
      for (size_t d = valid; d < text.size(); ++d) {
        at[d + 1] = json_step(*g_, at[d], static_cast<unsigned char>(text[d]));
        if (at[d + 1].threads.empty()) {
          dead_len = d + 1;
          valid = d;
          alive = false;
          break;
        }
        valid = d + 1;
      }
      if (alive) bits[size_t(id) / 64] |= uint64_t(1) << (id % 64);
    }
  }

  std::shared_ptr<const JsonGrammar> g_;
  std::shared_ptr<const TokenTexts> texts_;
  std::vector<int32_t> stops_;
  std::shared_ptr<MaskCache> cache_;
  JsonState state_;
  bool first_ = true;
};

}  // namespace

TokenConstraintFactory json_constraint(std::shared_ptr<const JsonGrammar> grammar,
                                       std::shared_ptr<const TokenTexts> texts, std::vector<int32_t> stop_ids) {
  auto cache = std::make_shared<MaskCache>();
  return [grammar = std::move(grammar), texts = std::move(texts), stops = std::move(stop_ids), cache] {
    return std::unique_ptr<TokenConstraint>(std::make_unique<JsonConstraint>(grammar, texts, stops, cache));
  };
}

}  // namespace zaya
