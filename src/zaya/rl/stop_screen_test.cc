// StopScreen (rollout.h): a sample's decoded text first holds a stop string
// at a token the screen lets through, on random samples of the
// test tokenizer's ids (byte pieces and control pieces included) against
// stop strings cut from such samples' own text; and the screen does keep
// most tokens from being decoded. Its decode is SentencePiece's text exactly,
// on random sequences of every piece type.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
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

// StopScreen::decode against the tokenizer's decode: random sequences of normal pieces (the table's), some led by
// pieces that start with or are SentencePiece's space, and sequences holding byte, unknown and control pieces
// (the tokenizer's); the screen is kept across them, so later ones read a filled table.
TEST(StopScreen, DecodesAsSentencePiece) {
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const int32_t V = tok.vocab_size();
  constexpr int32_t kNormal = 1;
  std::vector<int32_t> normal, other, spaced;  // spaced: normal pieces that start with SentencePiece's space
  for (int32_t id = 0; id < V; ++id) {
    (tok.piece_type(id) == kNormal ? normal : other).push_back(id);
    if (tok.piece_type(id) == kNormal && tok.id_to_piece(id).rfind("\u2581", 0) == 0) spaced.push_back(id);
  }
  std::vector<int32_t> types_seen(8, 0);
  for (const int32_t id : other) ++types_seen[size_t(std::min(tok.piece_type(id), 7))];
  ASSERT_GT(types_seen[6], 0);  // byte pieces
  ASSERT_GT(types_seen[3], 0);  // control pieces
  ASSERT_GT(types_seen[2], 0);  // the unknown piece
  ASSERT_GT(spaced.size(), 10u);
  Rng rng{23, 0, 0};
  const auto pick = [&](const std::vector<int32_t>& from) { return from[rng.next_u64() % from.size()]; };
  StopScreen screen(tok, {">"});
  for (int trial = 0; trial < 20000; ++trial) {
    const int64_t n = 1 + int64_t(rng.next_u64() % 24);
    const int kind = int(rng.next_u64() % 4);  // 0, 1: normal pieces; 2: led by a spaced one; 3: any ids
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i) {
      if (kind == 3)
        ids.push_back(rng.next_u64() % 3 == 0 ? pick(other) : int32_t(rng.next_u64() % uint64_t(V)));
      else
        ids.push_back(kind == 2 && i < 2 ? pick(spaced) : pick(normal));
    }
    ASSERT_EQ(screen.decode(ids), tok.decode(ids)) << "trial " << trial;
  }
  EXPECT_EQ(screen.decode({}), tok.decode(std::vector<int32_t>{}));
}

}  // namespace
}  // namespace zaya
