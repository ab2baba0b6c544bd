#include "zaya/serve/prompt_echo.h"

#include <algorithm>
#include <cstdint>

#include "zaya/core/error.h"

namespace zaya {

std::vector<ChoiceResult> echo_choices(const InferModel& model, const Tokenizer& tok,
                                       const std::vector<TextRequest>& texts, int64_t n, int64_t top_logprobs,
                                       ScorerOptions options) {
  ZAYA_CHECK(n >= 1 && texts.size() % size_t(n) == 0, "echo: {} requests are not whole groups of n = {}", texts.size(),
             n);
  const size_t prompts = texts.size() / size_t(n);
  // The scorer wants a prefix and a continuation: the first token, then the rest (a one-token prompt scores nothing).
  std::vector<ScoreGroup> groups;
  std::vector<size_t> group_of(prompts, SIZE_MAX);
  if (top_logprobs >= 0)
    for (size_t p = 0; p < prompts; ++p) {
      const std::vector<int32_t>& ids = texts[p * size_t(n)].generation.prompt;
      if (ids.size() < 2) continue;
      group_of[p] = groups.size();
      groups.push_back({{ids[0]}, {{ids.begin() + 1, ids.end()}}, {}});
    }
  options.token_top = top_logprobs;
  options.max_batch = std::max<int64_t>(1, std::min<int64_t>(options.max_batch, int64_t(groups.size())));
  const auto scores =
      groups.empty() ? std::vector<std::vector<ContinuationScore>>{} : score_groups(model, groups, options);
  std::vector<ChoiceResult> out(texts.size());
  for (size_t p = 0; p < prompts; ++p) {
    ChoiceResult echo;
    const TextRequest& t = texts[p * size_t(n)];
    echo.text = t.prompt;
    if (top_logprobs >= 0) {
      const std::vector<int32_t>& ids = t.generation.prompt;
      echo.logprobs.push_back({tok.decode({ids[0]}), std::nullopt, {}});
      for (size_t k = 1; k < ids.size(); ++k) {
        const TokenLogprobs& lp = scores[group_of[p]][0].per_token[k - 1];
        TokenLogprob e{tok.decode({ids[k]}), lp.chosen, {}};
        for (const auto& [id, l] : lp.top) e.top.emplace_back(tok.decode({id}), l);
        echo.logprobs.push_back(std::move(e));
      }
    }
    for (int64_t i = 0; i < n; ++i) out[p * size_t(n) + size_t(i)] = echo;
  }
  return out;
}

}  // namespace zaya
