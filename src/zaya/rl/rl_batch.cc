#include "zaya/rl/rl_batch.h"

#include <algorithm>
#include <limits>

#include "zaya/core/error.h"
#include "zaya/ops/routing.h"

namespace zaya {

RolloutBatches::RolloutBatches(int64_t micro, int64_t seq, int64_t accum)
    : micro_(micro),
      seq_(seq),
      accum_(accum),
      ids_(size_t(micro * seq * accum)),
      targets_(size_t(micro * seq * accum)),
      adv_(size_t(micro * seq * accum)),
      decoder_(size_t(micro * seq * accum)) {}

void RolloutBatches::keep_routing(int64_t layers, int64_t top_k) {
  layers_ = layers;
  top_k_ = top_k;
  routing_.assign(size_t(accum_ * layers * micro_ * seq_ * top_k), kNotRecorded);
}

void RolloutBatches::fill(const std::vector<RolloutSample>& samples, const std::vector<float>& advantages) {
  ZAYA_CHECK(int64_t(samples.size()) <= micro_ * accum_ && advantages.size() == samples.size(),
             "internal error: {} samples for {} rows", samples.size(), micro_ * accum_);
  std::fill(ids_.begin(), ids_.end(), 0);
  std::fill(targets_.begin(), targets_.end(), -1);
  std::fill(adv_.begin(), adv_.end(), 0.0f);
  std::fill(decoder_.begin(), decoder_.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(routing_.begin(), routing_.end(), kNotRecorded);
  real_tokens_ = 0;
  for (size_t j = 0; j < samples.size(); ++j) {
    const RolloutSample& s = samples[j];
    const std::vector<int32_t>& prompt = s.prompt->ids;
    const int64_t p = int64_t(prompt.size()), n = p + int64_t(s.tokens.size());
    ZAYA_CHECK(n - 1 <= seq_, "internal error: a sample of {} tokens in rows of {}", n, seq_);
    const int64_t row = int64_t(j) * seq_;
    const auto at = [&](int64_t t) { return t < p ? prompt[size_t(t)] : s.tokens[size_t(t - p)]; };
    for (int64_t t = 0; t + 1 < n; ++t) {
      ids_[size_t(row + t)] = at(t);
      adv_[size_t(row + t)] = advantages[j];
      if (t + 1 >= p) {
        targets_[size_t(row + t)] = at(t + 1);
        decoder_[size_t(row + t)] = s.logprobs[size_t(t + 1 - p)];
      }
    }
    if (!routing_.empty() && !s.routing.empty()) place_routing(j, s, n - 1);
    real_tokens_ += n - 1;
  }
  cursor_ = 0;
}

void RolloutBatches::place_routing(size_t j, const RolloutSample& s, int64_t inputs) {
  const int64_t L = layers_, J = top_k_, rows = micro_ * seq_;
  ZAYA_CHECK(int64_t(s.routing.size()) >= inputs * L * J,
             "internal error: a sample of {} inputs has a routing record of {} entries ({} layers x top {})", inputs,
             s.routing.size(), L, J);
  const int64_t a = int64_t(j) / micro_, at = (int64_t(j) % micro_) * seq_;
  int32_t* micro = routing_.data() + a * L * rows * J;
  for (int64_t t = 0; t < inputs; ++t)
    for (int64_t l = 0; l < L; ++l) std::copy_n(s.routing.data() + (t * L + l) * J, J, micro + (l * rows + at + t) * J);
}

void RolloutBatches::next(int32_t* ids, int32_t* targets, int64_t batch, int64_t seq, int /*rank*/, int /*ranks*/,
                          int32_t* doc_pos) {
  // The rows are this rank's already (its share of the step's samples: rl_dist.h).
  ZAYA_CHECK(batch == micro_ && seq == seq_ && doc_pos == nullptr && cursor_ < accum_,
             "internal error: RolloutBatches asked for another shape or past its micro-batches");
  const size_t at = size_t(cursor_ * micro_ * seq_), n = size_t(micro_ * seq_);
  std::copy_n(ids_.data() + at, n, ids);
  std::copy_n(targets_.data() + at, n, targets);
  ++cursor_;
}

}  // namespace zaya
