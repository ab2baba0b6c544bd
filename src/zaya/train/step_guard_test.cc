// The step guard without a model: which steps are skipped, when the run
// rolls back, and its state through a checkpoint.
#include "zaya/train/step_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace zaya {
namespace {

FaultToleranceConfig ft(int warmup = 4, double z = 3.0, int rollback_after = 2) {
  FaultToleranceConfig f;
  f.spike_warmup = warmup;
  f.spike_z = z;
  f.rollback_after = rollback_after;
  f.max_rollbacks = 2;
  return f;
}

// Accepts `n` steps of loss 2 +- 0.1 and gradient norm 1 +- 0.05 (steps 1..n).
void accept_steady(StepGuard& g, int n) {
  for (int i = 0; i < n; ++i) {
    const double wiggle = (i % 2 == 0) ? 1.0 : -1.0;
    const double loss = 2.0 + 0.1 * wiggle, gnorm = 1.0 + 0.05 * wiggle;
    ASSERT_EQ(g.judge(i + 1, loss, gnorm), nullptr) << "step " << i + 1;
    EXPECT_FALSE(g.record(nullptr, loss, gnorm));
  }
}

TEST(StepGuard, NonFiniteLossOrNormIsSkippedFromTheFirstStep) {
  StepGuard g(ft());
  EXPECT_STREQ(g.judge(1, std::nan(""), 1.0), "nan");
  EXPECT_STREQ(g.judge(1, 2.0, INFINITY), "nan");
  EXPECT_EQ(g.judge(1, 2.0, 1.0), nullptr);
}

TEST(StepGuard, ScheduledStepsAreSkipped) {
  FaultToleranceConfig f = ft();
  f.skip_steps = {3, 7};
  StepGuard g(f);
  EXPECT_EQ(g.judge(2, 2.0, 1.0), nullptr);
  EXPECT_STREQ(g.judge(3, 2.0, 1.0), "scheduled");
  EXPECT_STREQ(g.judge(7, 2.0, 1.0), "scheduled");
}

// A spike is judged only once the window holds spike_warmup accepted steps,
// against those steps; skipped steps never enter the window.
TEST(StepGuard, SpikesAgainstTheWindowAfterWarmup) {
  StepGuard g(ft(/*warmup=*/4));
  accept_steady(g, 3);
  EXPECT_EQ(g.judge(4, 50.0, 1.0), nullptr);  // 3 < warmup: not judged yet
  accept_steady(g, 1);
  EXPECT_EQ(g.window_steps(), 4);
  EXPECT_STREQ(g.judge(5, 50.0, 1.0), "loss-spike");
  EXPECT_STREQ(g.judge(5, 2.0, 40.0), "grad-norm-spike");
  EXPECT_EQ(g.judge(5, 2.1, 1.04), nullptr);  // within the window's spread
  EXPECT_FALSE(g.record("loss-spike", 50.0, 1.0));
  EXPECT_EQ(g.window_steps(), 4);  // the spike did not enter the window
  EXPECT_STREQ(g.judge(6, 50.0, 1.0), "loss-spike");
  // spike_z = 0 turns the detector off.
  StepGuard off(ft(4, 0.0));
  accept_steady(off, 8);
  EXPECT_EQ(off.judge(9, 50.0, 40.0), nullptr);
}

TEST(StepGuard, TheWindowStartsOverInANewPhase) {
  StepGuard g(ft(4));
  accept_steady(g, 6);
  g.start_over();
  EXPECT_EQ(g.window_steps(), 0);
  EXPECT_EQ(g.judge(7, 50.0, 1.0), nullptr);  // a new phase's loss is not compared with the old one's
}

TEST(StepGuard, ConsecutiveSkipsCallForARollback) {
  StepGuard g(ft(4, 3.0, /*rollback_after=*/3));
  EXPECT_FALSE(g.record("nan", NAN, NAN));
  EXPECT_FALSE(g.record("nan", NAN, NAN));
  EXPECT_FALSE(g.record(nullptr, 2.0, 1.0));  // an accepted step resets the count
  EXPECT_EQ(g.consecutive_skips(), 0);
  EXPECT_FALSE(g.record("nan", NAN, NAN));
  EXPECT_FALSE(g.record("scheduled", 2.0, 1.0));
  EXPECT_TRUE(g.record("nan", NAN, NAN));
  EXPECT_EQ(g.consecutive_skips(), 3);
  g.rolled_back();
  EXPECT_EQ(g.consecutive_skips(), 0);
  // rollback_after = 0: never.
  StepGuard never(ft(4, 3.0, 0));
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(never.record("nan", NAN, NAN));
}

TEST(StepGuard, RollbackNeedsACheckpointAndStopsAfterMaxRollbacks) {
  StepGuard g(ft());
  const auto none = g.rollback_refused("", 12);
  ASSERT_TRUE(none.has_value());
  EXPECT_NE(none->find("there is no checkpoint to roll back to"), std::string::npos) << *none;
  EXPECT_NE(none->find("up to step 12"), std::string::npos) << *none;
  EXPECT_FALSE(g.rollback_refused("ck/step_10", 12).has_value());
  EXPECT_FALSE(g.rollback_refused("ck/step_10", 13).has_value());
  const auto third = g.rollback_refused("ck/step_10", 14);  // max_rollbacks = 2
  ASSERT_TRUE(third.has_value());
  EXPECT_NE(third->find("rolled back to ck/step_10 2 times"), std::string::npos) << *third;
  EXPECT_FALSE(g.rollback_refused("ck/step_20", 24).has_value());  // counted per checkpoint
}

// The window survives a checkpoint exactly, also after it wrapped around its
// ring: the restored guard judges every later step as the original does.
TEST(StepGuard, StateRoundTripThroughACheckpoint) {
  StepGuard a(ft(4));
  for (int i = 0; i < StepGuard::kWindow + 37; ++i) a.record(nullptr, 2.0 + 0.01 * (i % 13), 1.0 + 0.02 * (i % 7));
  a.record("nan", NAN, NAN);
  nlohmann::json state;
  a.save_state(state);
  EXPECT_EQ(state["loss_window"].size(), size_t(StepGuard::kWindow));
  EXPECT_EQ(state["consecutive_skips"], 1);
  StepGuard b(ft(4));
  b.load_state(nlohmann::json::parse(state.dump()));
  nlohmann::json again;
  b.save_state(again);
  EXPECT_EQ(again, state);
  EXPECT_EQ(b.consecutive_skips(), 1);
  for (double loss : {1.9, 2.06, 2.2, 2.5, 3.0})
    for (double gnorm : {0.9, 1.06, 1.2, 1.5}) {
      const char* x = a.judge(1000, loss, gnorm);
      const char* y = b.judge(1000, loss, gnorm);
      EXPECT_EQ(x == nullptr, y == nullptr) << loss << " " << gnorm;
      if (x && y) {
        EXPECT_STREQ(x, y);
      }
    }
}

}  // namespace
}  // namespace zaya
