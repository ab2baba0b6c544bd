// The closing line's train losses: means over a window at each end, named by their steps.
#include "zaya/train/loss_ends.h"

#include <gtest/gtest.h>

namespace zaya {
namespace {

TEST(LossEnds, MeansOverAFifthOfTheSteps) {
  std::vector<double> l(30, 3.0);
  l[0] = 2.0;   // one lucky first batch
  l[29] = 4.0;  // one unlucky last batch
  const LossEnds e = loss_ends(l, 1);
  EXPECT_EQ(e.window, 6);
  EXPECT_DOUBLE_EQ(e.first, (2.0 + 5 * 3.0) / 6);
  EXPECT_DOUBLE_EQ(e.last, (4.0 + 5 * 3.0) / 6);
  EXPECT_EQ(e.describe(), "2.8333 (mean of steps 1-6) -> 3.1667 (steps 25-30)");
}

TEST(LossEnds, WindowBoundsAndResumedRuns) {
  EXPECT_EQ(loss_ends(std::vector<double>(1000, 1.0), 1).window, 10);
  const LossEnds two = loss_ends({2.5, 2.25}, 8);  // steps 8 and 9 of a resumed run
  EXPECT_EQ(two.window, 1);
  EXPECT_EQ(two.describe(), "2.5000 (step 8) -> 2.2500 (step 9)");
  EXPECT_EQ(loss_ends({}, 1).window, 0);
}

}  // namespace
}  // namespace zaya
