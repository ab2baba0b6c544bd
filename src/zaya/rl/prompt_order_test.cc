#include "zaya/rl/prompt_order.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {
namespace {

TEST(PromptOrder, EveryEpochIsAPermutationOfItsOwn) {
  PromptOrder o(7, 42);
  std::vector<size_t> first, second;
  for (int i = 0; i < 7; ++i) first.push_back(o.next());
  for (int i = 0; i < 7; ++i) second.push_back(o.next());
  EXPECT_EQ(o.epochs(), 2u);
  std::vector<size_t> a = first, b = second;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(a[i], i);
  EXPECT_EQ(a, b);
  EXPECT_NE(first, second);  // reshuffled (for this seed)
}

TEST(PromptOrder, ARestoredStateContinuesTheSameSequence) {
  PromptOrder full(5, 3);
  std::vector<size_t> seq;
  for (int i = 0; i < 13; ++i) seq.push_back(full.next());
  for (int cut : {0, 3, 5, 9}) {
    PromptOrder a(5, 3);
    for (int i = 0; i < cut; ++i) a.next();
    PromptOrder b(5, 3);  // as a resumed run: a fresh order given the state
    b.set_state(a.epochs(), a.position());
    for (int i = cut; i < 13; ++i) EXPECT_EQ(b.next(), seq[size_t(i)]) << "cut " << cut << " at " << i;
  }
}

TEST(PromptOrder, AStateOfAnotherPromptFileIsAnError) {
  PromptOrder o(5, 3);
  EXPECT_THROW(o.set_state(1, 6), Error);
  EXPECT_THROW(o.set_state(0, 2), Error);
}

}  // namespace
}  // namespace zaya
