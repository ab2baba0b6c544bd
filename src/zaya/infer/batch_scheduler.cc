#include "zaya/infer/batch_scheduler.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

BatchScheduler::BatchScheduler(const SchedulerOptions& o)
    : step_tokens_(o.step_tokens),
      snapshot_block_(o.snapshot_block),
      pool_pages_(o.pool_pages),
      reserved_(o.pool_pages.size(), 0),
      slots_(size_t(o.slots)) {
  ZAYA_CHECK(o.slots >= 1 && o.step_tokens >= o.slots && o.snapshot_block >= 0,
             "invalid scheduler ({} slots, {} tokens per step, snapshot block {}); a step must fit every slot", o.slots,
             o.step_tokens, o.snapshot_block);
  chunks_.reserve(slots_.size());
}

int64_t BatchScheduler::reserved_total() const {
  int64_t n = 0;
  for (int64_t r : reserved_) n += r;
  return n;
}

int32_t BatchScheduler::place(const std::vector<int64_t>& pages) const {
  int32_t slot = 0;
  while (slot < int32_t(slots_.size()) && running(slot)) ++slot;
  if (slot == int32_t(slots_.size())) return kNoSlot;
  for (size_t k = 0; k < pool_pages_.size(); ++k)
    if (reserved_[k] + (k < pages.size() ? pages[k] : 0) > pool_pages_[k]) return kNoPages;
  return slot;
}

void BatchScheduler::occupy(int32_t slot, Slot s) {
  ZAYA_ASSERT(slot >= 0 && slot < slots() && !running(slot));
  s.running = true;
  s.pages.resize(pool_pages_.size(), 0);
  for (size_t k = 0; k < pool_pages_.size(); ++k) reserved_[k] += s.pages[k];
  slots_[slot] = std::move(s);
  ++running_;
}

void BatchScheduler::start(int32_t slot, const GenerationRequest& request, std::vector<int64_t> pages) {
  Slot s;
  s.prompt = request.prompt;
  s.stop_ids = request.stop_ids;
  s.lora = request.lora.get();
  s.max_new_tokens = request.max_new_tokens;
  s.pages = std::move(pages);
  occupy(slot, std::move(s));
}

void BatchScheduler::start_forked(int32_t slot, const GenerationRequest& request, std::vector<int64_t> pages) {
  start(slot, request, std::move(pages));
  Slot& s = slots_[slot];
  s.fed = s.prompt_size();
  s.forked = true;
}

void BatchScheduler::start_forced(int32_t slot, std::span<const int32_t> tokens, LogitsWanted logits) {
  ZAYA_ASSERT(!tokens.empty());
  Slot s;
  s.prompt = tokens;
  s.decodes = false;
  s.prompt_logits = logits;
  occupy(slot, std::move(s));
}

void BatchScheduler::resume_at(int32_t slot, int64_t tokens) {
  ZAYA_ASSERT(running(slot) && tokens >= 0 && tokens < slots_[slot].prompt_size());
  slots_[slot].fed = tokens;
}

void BatchScheduler::end(int32_t slot) {
  Slot& s = slots_[slot];
  ZAYA_ASSERT(s.running);
  for (size_t k = 0; k < reserved_.size(); ++k) reserved_[k] -= s.pages[k];
  s = Slot{};
  --running_;
}

const std::vector<StepChunk>& BatchScheduler::plan() {
  chunks_.clear();
  int64_t budget = step_tokens_;
  planned_prompt_tokens_ = 0;
  for (int32_t i = 0; i < int32_t(slots_.size()); ++i) budget -= decoding(i);
  int64_t spare = budget;  // for drafts, after one token per decoding sequence
  for (int32_t i = 0; i < int32_t(slots_.size()); ++i) {
    Slot& s = slots_[i];
    if (!decoding(i)) continue;
    const int64_t k = std::min({s.draft, spare, s.max_new_tokens - s.generated - 1});
    s.draft = 0;
    if (k > 0) {
      s.verify[0] = s.last;
      chunks_.push_back({i, s.verify.data(), 1 + k, LogitsWanted::kAll, true, s.lora});
      spare -= k;
      budget -= k;
    } else {
      chunks_.push_back({i, &s.last, 1, LogitsWanted::kLast, false, s.lora});
    }
  }
  const int64_t B = snapshot_block_;
  for (int32_t i = 0; i < int32_t(slots_.size()) && budget > 0; ++i) {
    const Slot& s = slots_[i];
    if (!s.running || s.fed == s.prompt_size()) continue;
    int64_t n = std::min(budget, s.prompt_size() - s.fed);
    if (B > 0) {
      // End the chunk at a block boundary (the last one before the prompt's end if it reaches it), to snapshot there.
      const int64_t last_boundary = (s.prompt_size() - 1) / B * B, end = s.fed + n;
      const int64_t cut = s.fed < last_boundary && end >= last_boundary ? last_boundary : end / B * B;
      if (cut > s.fed) n = cut - s.fed;
    }
    const bool last = s.fed + n == s.prompt_size();
    const LogitsWanted logits = s.prompt_logits == LogitsWanted::kAll ? LogitsWanted::kAll
                                : last                                ? LogitsWanted::kLast
                                                                      : LogitsWanted::kNone;
    chunks_.push_back({i, s.prompt.data() + s.fed, n, logits, false, s.lora});
    budget -= n;
    planned_prompt_tokens_ += n;
  }
  return chunks_;
}

bool BatchScheduler::decoding(int32_t slot) const {
  const Slot& s = slots_[slot];
  return s.running && s.decodes && !s.forked && s.fed == s.prompt_size();
}

void BatchScheduler::propose(int32_t slot, std::span<const int32_t> draft) {
  Slot& s = slots_[slot];
  ZAYA_ASSERT(decoding(slot));
  s.verify.resize(draft.size() + 1);
  std::copy(draft.begin(), draft.end(), s.verify.begin() + 1);
  s.draft = int64_t(draft.size());
}

const std::vector<int32_t>& BatchScheduler::advance() {
  boundaries_.clear();
  for (const StepChunk& ch : chunks_) {
    Slot& s = slots_[ch.slot];
    if (s.fed >= s.prompt_size()) continue;
    s.fed += ch.count;
    if (snapshot_block_ > 0 && s.fed % snapshot_block_ == 0 && s.fed < s.prompt_size()) boundaries_.push_back(ch.slot);
  }
  return boundaries_;
}

std::optional<FinishReason> BatchScheduler::ends_before_step(int32_t slot, bool cancelled) const {
  const Slot& s = slots_[slot];
  ZAYA_ASSERT(s.running && s.decodes);
  if (cancelled) return FinishReason::kCancelled;
  if (s.generated >= s.max_new_tokens) return FinishReason::kLength;  // asked for no tokens
  return std::nullopt;
}

std::optional<FinishReason> BatchScheduler::accept(int32_t slot, int32_t token, int64_t length, int64_t max_context,
                                                   CallerStop caller) {
  Slot& s = slots_[slot];
  ZAYA_ASSERT(s.running && s.decodes);
  s.last = token;
  s.forked = false;
  ++s.generated;
  if (caller == CallerStop::kCancelled) return FinishReason::kCancelled;
  if (caller == CallerStop::kStopString) return FinishReason::kStop;
  if (std::find(s.stop_ids.begin(), s.stop_ids.end(), token) != s.stop_ids.end()) return FinishReason::kStop;
  if (s.generated >= s.max_new_tokens) return FinishReason::kLength;
  if (length >= max_context) return FinishReason::kContext;
  return std::nullopt;
}

}  // namespace zaya
