#include "zaya/train/batch_source.h"

namespace zaya {

ShardBatchSource::ShardBatchSource(const std::string& prefix, int64_t seq, uint64_t seed, SamplerOrder order,
                                   const ShardReadOptions& read)
    : shard_(std::make_unique<ShardReader>(ShardReader::open(prefix, read))),
      sampler_(std::make_unique<TokenSampler>(*shard_, seq, order, seed)) {}

void SyntheticBatchSource::next(int32_t* ids, int32_t* targets, int64_t batch, int64_t seq, int rank, int ranks,
                                int32_t* doc_pos) {
  for (int64_t b = 0; b < batch; ++b) {
    Rng rng{seed_, 0x5eed0000 + sequences_ + uint64_t(rank) * uint64_t(batch) + uint64_t(b), 0};
    int32_t prev = int32_t(rng.next_below(uint64_t(vocab_)));
    for (int64_t t = 0; t < seq; ++t) {
      const int32_t nxt = int32_t(rng.next_below(uint64_t(vocab_)));
      ids[b * seq + t] = prev;
      if (doc_pos != nullptr) doc_pos[b * seq + t] = int32_t(t);
      targets[b * seq + t] = nxt;
      prev = nxt;
    }
  }
  sequences_ += uint64_t(batch) * uint64_t(ranks);
}

}  // namespace zaya
