#include "zaya/infer/prefix_cache.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

PrefixCache::PrefixCache(std::vector<int32_t> slots, int64_t block) : slots_(std::move(slots)), block_(block) {
  ZAYA_CHECK(block >= 1, "prefix block {} is invalid; allowed: >= 1", block);
}

namespace {

bool starts_with(const std::vector<int32_t>& prompt, const std::vector<int32_t>& prefix) {
  return prefix.size() <= prompt.size() && std::equal(prefix.begin(), prefix.end(), prompt.begin());
}

}  // namespace

PrefixCache::Hit PrefixCache::find(const std::vector<int32_t>& prompt) {
  Entry* best = nullptr;
  for (Entry& e : entries_)
    if (e.tokens.size() < prompt.size() && starts_with(prompt, e.tokens) &&
        (!best || e.tokens.size() > best->tokens.size()))
      best = &e;
  if (!best) return {};
  best->used = ++clock_;
  return {best->slot, int64_t(best->tokens.size())};
}

int32_t PrefixCache::insert(const std::vector<int32_t>& prompt, int64_t length) {
  if (slots_.empty() || length <= 0 || length % block_ != 0 || length > int64_t(prompt.size())) return -1;
  for (Entry& e : entries_)
    if (int64_t(e.tokens.size()) == length && starts_with(prompt, e.tokens)) {
      e.used = ++clock_;
      return -1;
    }
  Entry* target = nullptr;
  if (entries_.size() < slots_.size()) {
    entries_.push_back({{}, slots_[entries_.size()], 0});
    target = &entries_.back();
  } else {
    target = &*std::min_element(entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.used < b.used; });
  }
  target->tokens.assign(prompt.begin(), prompt.begin() + length);
  target->used = ++clock_;
  return target->slot;
}

}  // namespace zaya
