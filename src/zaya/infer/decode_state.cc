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
}

void DecodeState::reset(int64_t slot) {
  lengths_[size_t(slot)] = 0;
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
}

}  // namespace zaya
