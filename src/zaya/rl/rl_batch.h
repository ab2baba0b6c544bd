#pragma once
// A step's samples as training rows (docs/rl.md): row j holds sample j's
// prompt and completion, its inputs seq[0..n-2] and next-token targets, -1
// on the prompt's positions and the padding, so that only the completion's
// tokens count in the loss; per position, the sample's advantage and the
// decoder's log-probability of the target (NaN where none). Rows past the
// samples are padding. As a BatchSource it hands out its micro-batches in
// order from reset(); on several data-parallel ranks each rank's batches hold
// its own samples (rl_dist.h), whatever rank the trainer asks for.

#include <cstdint>
#include <vector>

#include "zaya/rl/rollout.h"
#include "zaya/train/batch_source.h"

namespace zaya {

class RolloutBatches : public BatchSource {
 public:
  // `micro` rows of `seq` positions per micro-batch, `accum` micro-batches.
  RolloutBatches(int64_t micro, int64_t seq, int64_t accum);
  // Keep the samples' routing records (RolloutSample::routing) as the
  // trainer's layout: per micro-batch [layers, micro x seq, top_k], the record
  // of input position t at row position t, kNotRecorded on the padding
  // (ModelWorkspace::set_routing_record); a sample without a record
  // (rl.sample_with_trainer) leaves its row kNotRecorded.
  void keep_routing(int64_t layers, int64_t top_k);
  // Fails (internal error) when a sample does not fit a row or there are more samples than rows.
  void fill(const std::vector<RolloutSample>& samples, const std::vector<float>& advantages);
  void reset() { cursor_ = 0; }

  void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq, int rank = 0, int ranks = 1,
            int32_t* doc_pos_BS = nullptr) override;
  SamplerState state() const override { return {0, 0, uint64_t(cursor_)}; }
  void set_state(const SamplerState& s) override { cursor_ = int64_t(s.index); }
  bool loss_masked() const override { return true; }

  int64_t micro() const { return micro_; }
  int64_t seq() const { return seq_; }
  int64_t accum() const { return accum_; }
  int64_t positions() const { return micro_ * seq_ * accum_; }
  const int32_t* ids() const { return ids_.data(); }
  const int32_t* targets() const { return targets_.data(); }
  const float* advantages() const { return adv_.data(); }
  const float* decoder_logprobs() const { return decoder_.data(); }
  int64_t real_tokens() const { return real_tokens_; }  // input positions holding a sample's token
  // Micro-batch a's routing records (keep_routing), or null when they are not kept.
  const int32_t* routing(int64_t a) const {
    return routing_.empty() ? nullptr : routing_.data() + a * layers_ * micro_ * seq_ * top_k_;
  }

 private:
  void place_routing(size_t j, const RolloutSample& s, int64_t inputs);
  int64_t micro_, seq_, accum_, cursor_ = 0, real_tokens_ = 0;
  std::vector<int32_t> ids_, targets_;
  std::vector<float> adv_, decoder_;
  int64_t layers_ = 0, top_k_ = 0;
  std::vector<int32_t> routing_;  // [accum, layers, micro x seq, top_k]
};

}  // namespace zaya
