#include "zaya/infer/prefix_cache.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {
namespace {

bool starts_with(const std::vector<int32_t>& prompt, const std::vector<int32_t>& prefix) {
  return prefix.size() <= prompt.size() && std::equal(prefix.begin(), prefix.end(), prompt.begin());
}

}  // namespace

PrefixCache::PrefixCache(InferenceEngine& engine) : engine_(engine) {
  for (int64_t k = 0; k < engine.kv_kinds(); ++k) refs_.emplace_back(engine.pool_pages(k), 0);
}

PrefixCache::~PrefixCache() {
  while (evict_one()) {
  }
}

std::vector<int64_t> PrefixCache::pages() const {
  std::vector<int64_t> out(refs_.size(), 0);
  for (size_t k = 0; k < refs_.size(); ++k)
    for (int32_t r : refs_[k]) out[k] += r > 0;
  return out;
}

int64_t PrefixCache::start(const std::vector<int32_t>& prompt, int32_t slot, uint64_t adapter) {
  Entry* best = nullptr;
  for (Entry& e : entries_)
    if (e.adapter == adapter && e.tokens.size() < prompt.size() && starts_with(prompt, e.tokens) &&
        (!best || e.tokens.size() > best->tokens.size()))
      best = &e;
  if (!best) return 0;
  best->used = ++clock_;
  engine_.start_from(best->state, slot);
  return best->state.length;
}

bool PrefixCache::insert(const std::vector<int32_t>& prompt, int32_t slot, uint64_t adapter) {
  const int64_t length = engine_.length(slot);
  if (length <= 0 || length % block() != 0 || length > int64_t(prompt.size())) return false;
  for (Entry& e : entries_)
    if (e.adapter == adapter && int64_t(e.tokens.size()) == length && starts_with(prompt, e.tokens)) {
      e.used = ++clock_;
      return false;
    }
  Entry e;
  e.tokens.assign(prompt.begin(), prompt.begin() + length);
  e.adapter = adapter;
  e.state = engine_.share(slot);
  e.used = ++clock_;
  for (size_t k = 0; k < refs_.size(); ++k)
    for (int32_t page : e.state.pages[k])
      if (page >= 0) ++refs_[k][page];
  entries_.push_back(std::move(e));
  return true;
}

bool PrefixCache::in_use(const Entry& e) const {
  for (size_t k = 0; k < refs_.size(); ++k)
    for (int32_t page : e.state.pages[k])
      if (page >= 0 && engine_.page_refs(int64_t(k), page) > refs_[k][page]) return true;
  return false;
}

bool PrefixCache::evict_one() {
  if (entries_.empty()) return false;
  // Least recently used among the snapshots no sequence reads, else among all.
  auto oldest = entries_.end();
  for (int pass = 0; pass < 2 && oldest == entries_.end(); ++pass)
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if ((pass == 1 || !in_use(*it)) && (oldest == entries_.end() || it->used < oldest->used)) oldest = it;
  for (size_t k = 0; k < refs_.size(); ++k)
    for (int32_t page : oldest->state.pages[k])
      if (page >= 0) --refs_[k][page];
  engine_.release(oldest->state);
  entries_.erase(oldest);
  ++evictions_;
  return true;
}

bool PrefixCache::make_room(const std::vector<int64_t>& need) {
  auto enough = [&] {
    for (size_t k = 0; k < need.size(); ++k)
      if (engine_.free_pages(int64_t(k)) < need[k]) return false;
    return true;
  };
  while (!enough())
    if (!evict_one()) return false;
  return true;
}

}  // namespace zaya
