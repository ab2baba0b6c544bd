// StopScreen (rollout.h): a sample's decoded text first holds a stop string
// at a token the screen lets through, on random samples of the
// test tokenizer's ids (byte pieces and control pieces included) against
// stop strings cut from such samples' own text; and the screen does keep
// most tokens from being decoded.
#include <gtest/gtest.h>

#include <vector>

#include "zaya/core/rng.h"
#include "zaya/data/test_util.h"
#include "zaya/rl/rollout.h"

namespace zaya {
namespace {

TEST(StopScreen, AStopStringFirstAppearsAtATokenItLetsThrough) {
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const int32_t V = tok.vocab_size();
  Rng rng{11, 0, 0};
  const auto sample = [&](int64_t n) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(rng.next_u64() % uint64_t(V)));
    return ids;
  };
  int64_t completed = 0, screened = 0;
  for (int trial = 0; trial < 300; ++trial) {
    // Stop strings: 1..4 bytes of another sample's text (its last byte not a space, or the screen passes all).
    std::vector<std::string> stops;
    while (stops.size() < 2) {
      const std::string text = tok.decode(sample(6));
      if (text.empty()) continue;
      const size_t len = 1 + rng.next_u64() % 4, at = rng.next_u64() % text.size();
      const std::string stop = text.substr(at, len);
      if (stop.back() != ' ') stops.push_back(stop);
    }
    StopScreen screen(tok, stops);
    const std::vector<int32_t> ids = sample(12);
    for (size_t n = 1; n <= ids.size(); ++n) {
      const bool may = screen.may_end(ids[n - 1]);
      screened += may ? 0 : 1;
      const std::vector<int32_t> prefix(ids.begin(), ids.begin() + int64_t(n));
      if (completes_stop(tok, prefix, stops)) {
        ++completed;
        ASSERT_TRUE(may) << "trial " << trial << ": \"" << tok.decode(prefix) << "\" first holds a stop string at "
                         << "a token the screen keeps back";
        break;
      }
    }
  }
  EXPECT_GT(completed, 20);  // the check ran on samples that do end at a stop string
  EXPECT_GT(screened, 300);  // and the screen kept many tokens from decoding
}

}  // namespace
}  // namespace zaya
