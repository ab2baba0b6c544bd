#include "zaya/data/sampler_speed.h"

#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/data/sampler.h"

namespace zaya {

SamplerSpeed measure_sampler_speed(const ShardReader& shard, const SamplerSpeedOptions& o) {
  ZAYA_CHECK(o.seq >= 1 && o.batch >= 1 && o.ranks >= 1 && o.min_seconds > 0.0,
             "sampler speed: seq {}, batch {} and ranks {} must be >= 1 and min_seconds {} > 0", o.seq, o.batch,
             o.ranks, o.min_seconds);
  TokenSampler sampler(shard, o.seq, SamplerOrder::kShuffled, 1);
  std::vector<int32_t> input(static_cast<size_t>(o.batch * o.seq)), target(input.size());
  std::vector<int32_t> doc_pos(o.document_starts ? input.size() : 0);
  SamplerSpeed s;
  const double t0 = now_seconds();
  do {
    sampler.next_slice(input.data(), target.data(), o.batch, o.seq, 0, o.batch * o.ranks,
                       o.document_starts ? doc_pos.data() : nullptr);
    ++s.steps;
    s.seconds = now_seconds() - t0;
  } while (s.seconds < o.min_seconds);
  s.seconds_per_step = s.seconds / static_cast<double>(s.steps);
  s.tokens_per_second = static_cast<double>(s.steps * o.batch * o.seq) / s.seconds;
  return s;
}

}  // namespace zaya
