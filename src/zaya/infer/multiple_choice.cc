#include "zaya/infer/multiple_choice.h"

#include <cmath>
#include <fstream>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

// Unicode code points of UTF-8 text (Python's len(), which the harness divides by).
double code_points(const std::string& s) {
  double n = 0;
  for (unsigned char ch : s)
    if ((ch & 0xC0) != 0x80) n += 1;
  return n;
}

bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

std::vector<int32_t> id_list(const nlohmann::json& v, const std::string& where, int64_t vocab) {
  ZAYA_CHECK(v.is_array(), "{} must be a list of token ids", where);
  std::vector<int32_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    ZAYA_CHECK(v[i].is_number_integer() && v[i].get<int64_t>() >= 0 && v[i].get<int64_t>() < vocab,
               "{}[{}] = {} is not a token id in 0..{}", where, i, json_preview(v[i]), vocab - 1);
    out.push_back(v[i].get<int32_t>());
  }
  return out;
}

}  // namespace

int64_t argmax_first(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = int64_t(i);
  return best;
}

std::vector<McItem> read_mc_items(const std::string& path, const Tokenizer* tok, int64_t vocab, int64_t max_items) {
  std::vector<McItem> items;
  read_json_lines(path, [&](nlohmann::json&& j, const std::string& at) {
    ZAYA_CHECK(j.is_object(), "{}: expected a JSON object per line", at);
    for (auto it = j.begin(); it != j.end(); ++it) {
      static const char* kKeys[] = {"context", "choices", "gold", "context_ids", "choices_ids", "id", "meta"};
      bool known = false;
      for (const char* k : kKeys) known = known || it.key() == k;
      ZAYA_CHECK(known,
                 "{}: unknown key \"{}\"; allowed: context + choices or context_ids + choices_ids, gold, id, meta", at,
                 it.key());
    }
    McItem item;
    if (j.contains("id")) item.id = j["id"];
    ZAYA_CHECK(j.contains("gold") && j["gold"].is_number_integer(),
               "{}: \"gold\" (the correct choice's index) is "
               "missing or not an integer",
               at);
    item.gold = j["gold"].get<int64_t>();
    const bool text = j.contains("context") || j.contains("choices");
    const bool ids = j.contains("context_ids") || j.contains("choices_ids");
    ZAYA_CHECK(text != ids,
               "{}: give either \"context\" + \"choices\" (text) or \"context_ids\" + \"choices_ids\" "
               "(token ids)",
               at);
    if (text) {
      ZAYA_CHECK(tok != nullptr, "{}: text items need a tokenizer (--tokenizer, or MODEL/tokenizer.model)", at);
      ZAYA_CHECK(j.contains("context") && j["context"].is_string(), "{}: \"context\" must be a string", at);
      ZAYA_CHECK(j.contains("choices") && j["choices"].is_array() && !j["choices"].empty(),
                 "{}: \"choices\" must be a non-empty list of strings", at);
      const std::string context = j["context"].get<std::string>();
      // The harness moves the context's trailing whitespace to the front of the continuation.
      size_t keep = context.size();
      while (keep > 0 && is_space(context[keep - 1])) --keep;
      const std::string ctx = context.substr(0, keep), moved = context.substr(keep);
      const std::vector<int32_t> ctx_enc = tok->encode(ctx);
      item.context.push_back(tok->bos_id());
      item.context.insert(item.context.end(), ctx_enc.begin(), ctx_enc.end());
      for (size_t k = 0; k < j["choices"].size(); ++k) {
        const auto& ch = j["choices"][k];
        ZAYA_CHECK(ch.is_string(), "{}: \"choices\"[{}] must be a string", at, k);
        const std::string choice = ch.get<std::string>();
        const std::vector<int32_t> whole = tok->encode(ctx + moved + choice);
        std::vector<int32_t> cont;
        if (whole.size() > ctx_enc.size()) cont.assign(whole.begin() + int64_t(ctx_enc.size()), whole.end());
        ZAYA_CHECK(!cont.empty(), "{}: \"choices\"[{}] = {} adds no token to the context", at, k, json_preview(ch));
        item.choices.push_back(std::move(cont));
        item.choice_length.push_back(std::max(1.0, code_points(choice)));
      }
    } else {
      ZAYA_CHECK(j.contains("context_ids"), "{}: \"context_ids\" is missing", at);
      ZAYA_CHECK(j.contains("choices_ids") && j["choices_ids"].is_array() && !j["choices_ids"].empty(),
                 "{}: \"choices_ids\" must be a non-empty list of token-id lists", at);
      item.context = id_list(j["context_ids"], at + ": \"context_ids\"", vocab);
      ZAYA_CHECK(!item.context.empty(), "{}: \"context_ids\" is empty (start it with BOS)", at);
      for (size_t k = 0; k < j["choices_ids"].size(); ++k) {
        item.choices.push_back(
            id_list(j["choices_ids"][k], at + ": \"choices_ids\"[" + std::to_string(k) + "]", vocab));
        ZAYA_CHECK(!item.choices.back().empty(), "{}: \"choices_ids\"[{}] is empty", at, k);
        item.choice_length.push_back(double(item.choices.back().size()));
      }
    }
    ZAYA_CHECK(item.gold >= 0 && item.gold < int64_t(item.choices.size()),
               "{}: \"gold\" = {} is invalid; allowed: 0..{} (an index into the choices)", at, item.gold,
               item.choices.size() - 1);
    items.push_back(std::move(item));
    return max_items <= 0 || int64_t(items.size()) < max_items;  // the next line is not read past the limit
  });
  ZAYA_CHECK(!items.empty(), "{}: no items (one JSON object per line)", path);
  return items;
}

McSummary evaluate_multiple_choice(const InferModel& model, const std::vector<McItem>& items,
                                   const ScorerOptions& options, const std::function<void(size_t, size_t)>& progress) {
  std::vector<ScoreGroup> groups;
  groups.reserve(items.size());
  for (const McItem& it : items) groups.push_back({it.context, it.choices, {}});
  const auto scores = score_groups(model, groups, options, progress);
  McSummary s;
  s.items = int64_t(items.size());
  double hits = 0, hits_norm = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    McItemResult r;
    std::vector<double> norm;
    for (size_t k = 0; k < scores[i].size(); ++k) {
      r.logprob.push_back(scores[i][k].logprob);
      r.greedy.push_back(scores[i][k].greedy);
      norm.push_back(scores[i][k].logprob / items[i].choice_length[k]);
    }
    r.pred = argmax_first(r.logprob);
    r.pred_norm = argmax_first(norm);
    hits += r.pred == items[i].gold;
    hits_norm += r.pred_norm == items[i].gold;
    s.per_item.push_back(std::move(r));
  }
  const double n = double(s.items);
  // The harness's standard error of a mean of 0/1 scores: sqrt(p (1 - p) / (n - 1)).
  auto stderr_of = [n](double p) { return n > 1 ? std::sqrt(p * (1 - p) / (n - 1)) : 0.0; };
  s.acc = hits / n;
  s.acc_norm = hits_norm / n;
  s.acc_stderr = stderr_of(s.acc);
  s.acc_norm_stderr = stderr_of(s.acc_norm);
  return s;
}

}  // namespace zaya
