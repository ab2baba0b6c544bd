// The batch scheduler with a fake engine (no model): admission order under
// page pressure, the step budget split between decode and prompt chunks,
// snapshot-block cuts, and each finish reason it decides.
#include "zaya/infer/batch_scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace zaya {
namespace {

// Appends each chunk to its slot's length and checks what a real engine checks:
// distinct slots, a step within the budget, tokens present. Returns the slots
// that get logits, chunks in order.
struct FakeEngine {
  std::vector<int64_t> length;
  int64_t budget;
  std::vector<int32_t> step(const std::vector<StepChunk>& chunks) {
    std::vector<char> seen(length.size(), 0);
    int64_t tokens = 0;
    std::vector<int32_t> rows;
    for (const StepChunk& ch : chunks) {
      EXPECT_FALSE(seen[ch.slot]) << "slot " << ch.slot << " twice in one step";
      seen[ch.slot] = 1;
      EXPECT_GE(ch.count, 1);
      EXPECT_NE(ch.tokens, nullptr);
      length[ch.slot] += ch.count;
      tokens += ch.count;
      if (ch.logits == LogitsWanted::kLast) rows.push_back(ch.slot);
    }
    EXPECT_LE(tokens, budget);
    return rows;
  }
};

GenerationRequest request(int64_t prompt, int64_t max_new, std::vector<int32_t> stop_ids = {}) {
  GenerationRequest r;
  r.prompt.resize(size_t(prompt));
  std::iota(r.prompt.begin(), r.prompt.end(), 1);
  r.max_new_tokens = max_new;
  r.stop_ids = std::move(stop_ids);
  return r;
}

TEST(BatchScheduler, AdmissionInOrderUnderPagePressure) {
  SchedulerOptions o;
  o.slots = 3;
  o.step_tokens = 8;
  o.pool_pages = {10, 4};
  BatchScheduler sched(o);
  const GenerationRequest a = request(4, 4), b = request(4, 4), c = request(4, 4);
  ASSERT_EQ(sched.place({6, 2}), 0);
  sched.start(0, a, {6, 2});
  EXPECT_EQ(sched.reserved(), (std::vector<int64_t>{6, 2}));
  // The next needs more of the first kind than is left: it waits although a slot is free.
  EXPECT_EQ(sched.place({6, 1}), BatchScheduler::kNoPages);
  EXPECT_EQ(sched.place({4, 3}), BatchScheduler::kNoPages);  // the second kind is short too
  ASSERT_EQ(sched.place({4, 2}), 1);                         // exactly full fits
  sched.start(1, b, {4, 2});
  EXPECT_EQ(sched.reserved_total(), 14);
  ASSERT_EQ(sched.place({0, 0}), 2);
  sched.start(2, c, {0, 0});
  EXPECT_TRUE(sched.full());
  EXPECT_EQ(sched.place({0, 0}), BatchScheduler::kNoSlot);
  // An end frees its slot and its reservation; the lowest free slot admits next.
  sched.end(0);
  EXPECT_EQ(sched.reserved(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(sched.running_count(), 2);
  EXPECT_EQ(sched.place({6, 2}), 0);
}

TEST(BatchScheduler, DecodeFirstThenPromptChunksInTheRemainingBudget) {
  SchedulerOptions o;
  o.slots = 3;
  o.step_tokens = 8;
  BatchScheduler sched(o);
  FakeEngine engine{{0, 0, 0}, 8};
  const GenerationRequest a = request(3, 10), b = request(10, 10), c = request(5, 10);
  sched.start(0, a, {});
  // Alone, a's whole prompt (3) with logits for its last token.
  std::vector<StepChunk> plan = sched.plan();
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].slot, 0);
  EXPECT_EQ(plan[0].count, 3);
  EXPECT_EQ(plan[0].logits, LogitsWanted::kLast);
  sched.start(1, b, {});
  sched.start(2, c, {});
  // Step 1: a's whole prompt (3), then 5 of b's 10; c waits for budget.
  plan = sched.plan();
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[1].slot, 1);
  EXPECT_EQ(plan[1].count, 5);
  EXPECT_EQ(plan[1].logits, LogitsWanted::kNone);  // not the prompt's end: no logits
  EXPECT_EQ(sched.planned_prompt_tokens(), 8);
  EXPECT_EQ(engine.step(plan), std::vector<int32_t>{0});
  sched.advance();
  EXPECT_EQ(sched.fed(0), 3);
  EXPECT_EQ(sched.fed(1), 5);
  EXPECT_FALSE(sched.accept(0, 42, engine.length[0], 100));
  // Step 2: a decodes its sampled token first, then b's last 5 tokens, then 2 of c's.
  plan = sched.plan();
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].slot, 0);
  EXPECT_EQ(plan[0].count, 1);
  EXPECT_EQ(plan[0].tokens[0], 42);
  EXPECT_EQ(plan[1].slot, 1);
  EXPECT_EQ(plan[1].count, 5);
  EXPECT_EQ(plan[1].tokens[0], 6);  // b's prompt from position 5 (ids 1..10)
  EXPECT_EQ(plan[1].logits, LogitsWanted::kLast);
  EXPECT_EQ(plan[2].slot, 2);
  EXPECT_EQ(plan[2].count, 2);
  EXPECT_EQ(sched.planned_prompt_tokens(), 7);
  EXPECT_EQ(engine.step(plan), (std::vector<int32_t>{0, 1}));
  sched.advance();
  // Step 3: two decoders, then c's remaining 3.
  EXPECT_FALSE(sched.accept(0, 7, engine.length[0], 100));
  EXPECT_FALSE(sched.accept(1, 8, engine.length[1], 100));
  plan = sched.plan();
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[2].slot, 2);
  EXPECT_EQ(plan[2].count, 3);
  EXPECT_EQ(engine.step(plan), (std::vector<int32_t>{0, 1, 2}));
  sched.advance();
  EXPECT_EQ(engine.length, (std::vector<int64_t>{5, 11, 5}));
}

TEST(BatchScheduler, PromptChunksEndAtSnapshotBlocks) {
  SchedulerOptions o;
  o.slots = 1;
  o.step_tokens = 6;
  o.snapshot_block = 4;
  BatchScheduler sched(o);
  const GenerationRequest a = request(10, 4);
  sched.start(0, a, {});
  // 6 would end at 6: cut to 4, a block boundary, which is snapshotted.
  EXPECT_EQ(sched.plan()[0].count, 4);
  EXPECT_EQ(sched.advance(), std::vector<int32_t>{0});
  // 4..10 would reach the end: cut at the last boundary before it (8).
  EXPECT_EQ(sched.plan()[0].count, 4);
  EXPECT_EQ(sched.advance(), std::vector<int32_t>{0});
  // The rest; the prompt's end is no snapshot.
  EXPECT_EQ(sched.plan()[0].count, 2);
  EXPECT_TRUE(sched.advance().empty());
  // A resumed sequence (a prefix-cache hit) starts where its snapshot ends.
  sched.end(0);
  sched.start(0, a, {});
  sched.resume_at(0, 8);
  EXPECT_EQ(sched.plan()[0].count, 2);
  EXPECT_EQ(sched.plan()[0].tokens[0], 9);
}

TEST(BatchScheduler, FinishReasons) {
  SchedulerOptions o;
  o.slots = 1;
  o.step_tokens = 4;
  BatchScheduler sched(o);
  // A stop id ends the sequence, before its token limit would.
  const GenerationRequest stop = request(2, 2, {5});
  sched.start(0, stop, {});
  EXPECT_FALSE(sched.accept(0, 4, 3, 100).has_value());
  EXPECT_EQ(sched.accept(0, 5, 4, 100), FinishReason::kStop);
  EXPECT_EQ(sched.generated(0), 2);
  sched.end(0);
  // The token limit, before the context end.
  const GenerationRequest length = request(2, 2);
  sched.start(0, length, {});
  EXPECT_FALSE(sched.accept(0, 4, 3, 4).has_value());
  EXPECT_EQ(sched.accept(0, 4, 4, 4), FinishReason::kLength);
  sched.end(0);
  // The context end.
  const GenerationRequest context = request(2, 10);
  sched.start(0, context, {});
  EXPECT_FALSE(sched.accept(0, 4, 3, 4).has_value());
  EXPECT_EQ(sched.accept(0, 4, 4, 4), FinishReason::kContext);
  sched.end(0);
  EXPECT_EQ(sched.running_count(), 0);
  EXPECT_TRUE(sched.plan().empty());
}

}  // namespace
}  // namespace zaya
