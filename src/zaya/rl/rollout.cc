#include "zaya/rl/rollout.h"

#include <algorithm>
#include <optional>

#include "zaya/core/timer.h"

namespace zaya {

std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t end = text.size();
  for (const std::string& s : stops)
    if (!s.empty()) end = std::min(end, text.find(s));
  return text.substr(0, end);
}

bool holds_stop(const std::string& text, const std::vector<std::string>& stops) {
  for (const std::string& stop : stops)
    if (!stop.empty() && text.find(stop) != std::string::npos) return true;
  return false;
}

bool completes_stop(const Tokenizer& tok, const std::vector<int32_t>& tokens, const std::vector<std::string>& stops) {
  return !stops.empty() && holds_stop(tok.decode(tokens), stops);
}

bool StopScreen::tabled(int32_t id) {
  constexpr int32_t kNormalPiece = 1;  // SentencePiece's type (Tokenizer::piece_type)
  const int32_t V = tokenizer_.vocab_size();
  if (id < 0 || id >= V) return false;
  if (table_state_.empty()) {
    table_state_.assign(size_t(V), 0);
    first_text_.resize(size_t(V));
    next_text_.resize(size_t(V));
  }
  if (anchor_ == -2) {
    anchor_ = -1;
    for (int32_t a = 0; a < V && anchor_ < 0; ++a)
      if (tokenizer_.piece_type(a) == kNormalPiece && !(anchor_text_ = tokenizer_.decode({a})).empty()) anchor_ = a;
  }
  int8_t& state = table_state_[size_t(id)];
  if (state == 0) {
    state = 2;
    if (anchor_ >= 0 && tokenizer_.piece_type(id) == kNormalPiece) {
      const std::string pair = tokenizer_.decode({anchor_, id});
      if (pair.compare(0, anchor_text_.size(), anchor_text_) == 0) {
        first_text_[size_t(id)] = tokenizer_.decode({id});
        next_text_[size_t(id)] = pair.substr(anchor_text_.size());
        state = 1;
      }
    }
  }
  return state == 1;
}

const std::string& StopScreen::decode(const std::vector<int32_t>& ids) {
  text_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (!tabled(id) || (i == 0 && first_text_[size_t(id)].empty())) return text_ = tokenizer_.decode(ids);
    text_ += i == 0 ? first_text_[size_t(id)] : next_text_[size_t(id)];
  }
  if (ids.empty()) text_ = tokenizer_.decode(ids);
  return text_;
}

StopScreen::StopScreen(const Tokenizer& tok, const std::vector<std::string>& stops) : tokenizer_(tok) {
  for (const std::string& stop : stops)
    if (!stop.empty()) last_bytes_.push_back(stop.back());
  every_token_ = last_bytes_.find(' ') != std::string::npos;
}

bool StopScreen::may_end(int32_t id) {
  if (every_token_) return true;
  if (last_bytes_.empty()) return false;
  if (known_.empty()) known_.assign(size_t(tokenizer_.vocab_size()), -1);
  if (id < 0 || size_t(id) >= known_.size()) return true;  // (completes_stop says what is wrong with it)
  int8_t& k = known_[size_t(id)];
  if (k < 0) {
    constexpr int32_t kUnknownPiece = 2, kBytePiece = 6;  // SentencePiece's types (Tokenizer::piece_type)
    const int32_t type = tokenizer_.piece_type(id);
    k = type == kUnknownPiece || type == kBytePiece ||
        tokenizer_.decode({id}).find_first_of(last_bytes_) != std::string::npos;
  }
  return k != 0;
}

std::vector<RolloutSample> run_rollout(const InferModel& model, const Tokenizer& tok,
                                       const std::vector<const RlPrompt*>& prompts, int64_t group,
                                       const RolloutSettings& s, uint64_t seed, RolloutStats* stats,
                                       Generator* generator, StopScreen* screen) {
  std::vector<GenerationRequest> requests;
  std::vector<RolloutSample> samples;
  int64_t longest = 0;
  for (const RlPrompt* p : prompts)
    for (int64_t g = 0; g < group; ++g) {
      GenerationRequest r;
      r.prompt = p->ids;
      r.max_new_tokens = s.max_new_tokens;
      r.sampling = s.sampling;
      r.sampling.seed = seed + uint64_t(requests.size());
      r.stop_ids = s.stop_ids;
      longest = std::max(longest, int64_t(p->ids.size()) + s.max_new_tokens);
      requests.push_back(std::move(r));
      samples.push_back({p, {}, {}, {}, {}});
    }
  GeneratorOptions o;
  o.max_batch = std::max<int64_t>(1, int64_t(requests.size()));
  o.max_context = longest;
  o.bf16_activations = s.bf16_activations;
  o.logprobs = true;
  o.routing = true;
  // Stop strings: the decoded text so far, checked as a token arrives that can complete one (StopScreen: a stop
  // string first appears at such a token). The screen's answers are per id: a run keeps them from step to step.
  // A sample that ends at a stop string ends at the tokens just decoded: that text is kept for the sample's own
  // (decode is a function of the ids alone), not decoded again below. The screen decodes from its table of the
  // pieces' texts (StopScreen::decode: SentencePiece's text exactly, from the tokenizer where the table cannot be).
  std::vector<std::vector<int32_t>> so_far(requests.size());
  std::vector<std::string> ended_text(requests.size());
  std::vector<uint8_t> ended_at_stop(requests.size(), 0);
  std::optional<StopScreen> own_screen;
  if (screen == nullptr) screen = &own_screen.emplace(tok, s.stop_strings);
  const TokenCallback on_token = [&](size_t r, int32_t id) {
    if (s.stop_strings.empty()) return true;
    so_far[r].push_back(id);
    if (!screen->may_end(id)) return true;
    const std::string& text = screen->decode(so_far[r]);
    if (!holds_stop(text, s.stop_strings)) return true;
    ended_text[r] = text;
    ended_at_stop[r] = 1;
    return false;
  };
  GenerationStats gs;
  const double t0 = now_seconds();
  Generator one_off;
  std::vector<GenerationResult> results =
      (generator != nullptr ? *generator : one_off).run(model, requests, o, on_token, {}, &gs);
  for (size_t k = 0; k < results.size(); ++k) {
    samples[k].tokens = std::move(results[k].tokens);
    samples[k].logprobs = std::move(results[k].logprobs);
    samples[k].routing = std::move(results[k].routing);
    const bool decoded = ended_at_stop[k] != 0 && so_far[k] == samples[k].tokens;
    samples[k].text = cut_at_stop(decoded ? ended_text[k] : tok.decode(samples[k].tokens), s.stop_strings);
  }
  if (stats != nullptr) {
    stats->generated_tokens = gs.generated_tokens;
    stats->seconds = now_seconds() - t0;
    stats->prompt_tokens = gs.prompt_tokens;
    stats->decode_tokens = gs.decode_tokens;
    stats->decode_seconds = gs.decode_seconds;
  }
  return samples;
}

}  // namespace zaya
