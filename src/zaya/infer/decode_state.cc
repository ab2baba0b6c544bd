#include "zaya/infer/decode_state.h"

#include <algorithm>
#include <cstring>

#include "zaya/core/error.h"
#include "zaya/model/conv_taps.h"

namespace zaya {

DecodeState::DecodeState(const ZayaConfig& c, int64_t slots)
    : blocks_(c.num_blocks), conv_rows_(conv_history(c)), channels_(c.conv_channels()), half_(c.kv_width() / 2) {
  const int64_t conv = blocks_ * slots * conv_rows_ * channels_, vprev = blocks_ * slots * half_;
  conv_ = aligned_alloc_array<float>(size_t(std::max<int64_t>(1, conv)));
  vprev_ = aligned_alloc_array<float>(size_t(std::max<int64_t>(1, vprev)));
  std::memset(conv_.get(), 0, sizeof(float) * conv);
  std::memset(vprev_.get(), 0, sizeof(float) * vprev);
  lengths_.assign(size_t(slots), 0);
  drafts_.resize(size_t(slots));
}

void DecodeState::reset(int64_t slot) {
  lengths_[size_t(slot)] = 0;
  drafts_[size_t(slot)].count = 0;
  for (int64_t b = 0; b < blocks_; ++b) {
    std::memset(conv(b, slot), 0, sizeof(float) * conv_rows_ * channels_);
    std::memset(vprev(b, slot), 0, sizeof(float) * half_);
  }
}

void DecodeState::copy(int64_t src, int64_t dst) {
  for (int64_t b = 0; b < blocks_; ++b) {
    std::memcpy(conv(b, dst), conv(b, src), sizeof(float) * conv_rows_ * channels_);
    std::memcpy(vprev(b, dst), vprev(b, src), sizeof(float) * half_);
  }
  lengths_[size_t(dst)] = lengths_[size_t(src)];
  drafts_[size_t(dst)].count = 0;
}

std::vector<float> DecodeState::save(int64_t slot) const {
  const int64_t per = conv_rows_ * channels_ + half_;
  std::vector<float> small(size_t(blocks_ * per));
  for (int64_t b = 0; b < blocks_; ++b) {
    std::memcpy(small.data() + b * per, conv(b, slot), sizeof(float) * conv_rows_ * channels_);
    std::memcpy(small.data() + b * per + conv_rows_ * channels_, vprev(b, slot), sizeof(float) * half_);
  }
  return small;
}

void DecodeState::restore(const std::vector<float>& small, int64_t length, int64_t slot) {
  const int64_t per = conv_rows_ * channels_ + half_;
  ZAYA_ASSERT(int64_t(small.size()) == blocks_ * per);
  for (int64_t b = 0; b < blocks_; ++b) {
    std::memcpy(conv(b, slot), small.data() + b * per, sizeof(float) * conv_rows_ * channels_);
    std::memcpy(vprev(b, slot), small.data() + b * per + conv_rows_ * channels_, sizeof(float) * half_);
  }
  lengths_[size_t(slot)] = length;
  drafts_[size_t(slot)].count = 0;
}

void DecodeState::draft_begin(int64_t slot, int64_t count) {
  ZAYA_ASSERT(count >= 1);
  Draft& d = drafts_[size_t(slot)];
  d.past = lengths_[size_t(slot)];
  d.count = count;
  const size_t need = size_t(blocks_ * draft_floats(count));
  if (d.log.size() < need) d.log.resize(need);  // grows to the longest draft, then reused
}

void DecodeState::draft_record(int64_t block, int64_t slot, const float* raw_TP, int64_t ld, int64_t vprev_col) {
  Draft& d = drafts_[size_t(slot)];
  ZAYA_ASSERT(d.count > 0);
  const int64_t C = channels_, H = conv_rows_;
  float* log = d.log.data() + block * draft_floats(d.count);
  std::memcpy(log, conv(block, slot), sizeof(float) * H * C);
  std::memcpy(log + H * C, vprev(block, slot), sizeof(float) * half_);
  float* rows = log + H * C + half_;
  float* prods = rows + d.count * C;
  for (int64_t t = 0; t < d.count; ++t) {
    std::memcpy(rows + t * C, raw_TP + t * ld, sizeof(float) * C);
    std::memcpy(prods + t * half_, raw_TP + t * ld + vprev_col, sizeof(float) * half_);
  }
}

void DecodeState::keep_draft(int64_t slot, int64_t length) {
  Draft& d = drafts_[size_t(slot)];
  ZAYA_ASSERT(d.count > 0 && length >= d.past && length <= d.past + d.count);
  const int64_t C = channels_, H = conv_rows_, j = length - d.past;
  for (int64_t b = 0; b < blocks_; ++b) {
    const float* log = d.log.data() + b * draft_floats(d.count);
    const float* rows = log + H * C + half_;
    // The raw rows before position `length`, oldest first: [old state (H rows), the kept j rows].
    for (int64_t i = 0; i < H; ++i) {
      const int64_t at = j + i;
      std::memcpy(conv(b, slot) + i * C, at < H ? log + at * C : rows + (at - H) * C, sizeof(float) * C);
    }
    std::memcpy(vprev(b, slot), j == 0 ? log + H * C : rows + d.count * C + (j - 1) * half_, sizeof(float) * half_);
  }
  lengths_[size_t(slot)] = length;
  d.count = 0;
}

}  // namespace zaya
