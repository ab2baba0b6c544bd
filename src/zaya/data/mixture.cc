#include "zaya/data/mixture.h"

#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"

namespace zaya {
namespace {

// Counter space of the per-dataset sampler seeds, apart from the choices' (stream, i).
constexpr uint64_t kSeedStream = uint64_t{0x6d6978} << 40;  // "mix"

uint64_t u64_of(const std::array<uint32_t, 4>& b) { return (uint64_t(b[0]) << 32) | b[1]; }

}  // namespace

MixtureSampler::MixtureSampler(const std::vector<const ShardReader*>& shards, const std::vector<double>& weights,
                               int64_t seq, uint64_t seed, uint64_t stream)
    : seq_(seq), seed_(seed), stream_(stream) {
  ZAYA_CHECK(!shards.empty() && shards.size() == weights.size(),
             "a data mixture needs one weight per dataset ({} datasets, {} weights)", shards.size(), weights.size());
  double total = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    ZAYA_CHECK(std::isfinite(weights[k]) && weights[k] > 0, "{}: mixture weight {} is invalid; allowed: > 0",
               shards[k]->prefix(), weights[k]);
    total += weights[k];
  }
  double sum = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    sum += weights[k];
    cumulative_.push_back(k + 1 == shards.size() ? 1.0 : sum / total);
    samplers_.emplace_back(*shards[k], seq, SamplerOrder::kShuffled, u64_of(philox4x32(seed, kSeedStream ^ stream, k)));
  }
}

size_t MixtureSampler::dataset_of(uint64_t i) const {
  const double u = double(u64_of(philox4x32(seed_, stream_, i)) >> 11) * (1.0 / 9007199254740992.0);
  size_t k = 0;
  while (u >= cumulative_[k]) ++k;  // cumulative_.back() == 1 > u
  return k;
}

void MixtureSampler::next_slice(int32_t* input_BS, int32_t* target_BS, int64_t batch, int64_t seq, int64_t first,
                                int64_t total, int32_t* doc_pos_BS) {
  ZAYA_CHECK(seq == seq_, "a data mixture of sequence length {} was asked for sequences of {}", seq_, seq);
  ZAYA_CHECK(batch >= 0 && first >= 0 && first + batch <= total, "slice {}..{} of a draw of {} sequences is invalid",
             first, first + batch, total);
  for (int64_t i = 0; i < total; ++i) {
    TokenSampler& s = samplers_[dataset_of(position_ + uint64_t(i))];
    if (i >= first && i < first + batch) {
      s.next_slice(input_BS + (i - first) * seq, target_BS + (i - first) * seq, 1, seq, 0, 1,
                   doc_pos_BS != nullptr ? doc_pos_BS + (i - first) * seq : nullptr);
    } else {
      s.next_slice(nullptr, nullptr, 0, seq, 0, 1);  // another rank's sequence: only the position advances
    }
  }
  position_ += uint64_t(total);
}

MixtureState MixtureSampler::state() const {
  MixtureState st;
  st.position = position_;
  for (const TokenSampler& s : samplers_) st.datasets.push_back(s.state());
  return st;
}

void MixtureSampler::set_state(const MixtureState& state) {
  ZAYA_CHECK(state.datasets.size() == samplers_.size(),
             "a data mixture state for {} datasets cannot be restored into a mixture of {} (was it saved for "
             "another phase or recipe?)",
             state.datasets.size(), samplers_.size());
  for (size_t k = 0; k < samplers_.size(); ++k) samplers_[k].set_state(state.datasets[k]);
  position_ = state.position;
}

MixtureState MixtureSampler::state_at(uint64_t position) const {
  std::vector<uint64_t> drawn(samplers_.size(), 0);
  for (uint64_t i = 0; i < position; ++i) ++drawn[dataset_of(i)];
  MixtureState st;
  st.position = position;
  for (size_t k = 0; k < samplers_.size(); ++k) {
    // TokenSampler moves to the next epoch lazily, when it draws past the last
    // window: after n draws it is at (epoch (n - 1) / W, index n - epoch * W).
    const uint64_t n = drawn[k], w = samplers_[k].windows_per_epoch();
    const uint64_t epoch = n == 0 ? 0 : (n - 1) / w;
    st.datasets.push_back({samplers_[k].state().seed, epoch, n - epoch * w});
  }
  return st;
}

bool MixtureSampler::loss_masked() const {
  for (const TokenSampler& s : samplers_)
    if (s.loss_masked()) return true;
  return false;
}

}  // namespace zaya
