// The batch scheduler with a fake engine (no model): admission order under
// page pressure, the step budget split between decode and prompt chunks,
// snapshot-block cuts, teacher-forced (scoring) sequences, forks that wait
// for another slot's prefill, and each finish reason it decides.
#include "zaya/infer/batch_scheduler.h"

#include <gtest/gtest.h>

#include <deque>
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

// A fork (start_forked) plans nothing while its leader prefills the prompt; once its first token is accepted
// (sampled from the leader's logits, the leader's state copied) it decodes like any sequence.
TEST(BatchScheduler, ForkWaitsForItsFirstTokenThenDecodes) {
  SchedulerOptions o;
  o.slots = 2;
  o.step_tokens = 4;
  BatchScheduler sched(o);
  FakeEngine engine{{0, 0}, 4};
  const GenerationRequest a = request(6, 3), b = request(6, 3);
  sched.start(0, a, {});
  sched.start_forked(1, b, {});
  EXPECT_FALSE(sched.decoding(1));
  EXPECT_EQ(sched.fed(1), 6);
  EXPECT_FALSE(sched.ends_before_step(1, false).has_value());
  for (int step = 0; step < 2; ++step) {
    const std::vector<StepChunk>& chunks = sched.plan();
    ASSERT_EQ(chunks.size(), 1u) << "step " << step;
    EXPECT_EQ(chunks[0].slot, 0);
    engine.step(chunks);
    sched.advance();
  }
  EXPECT_TRUE(sched.decoding(0));
  EXPECT_FALSE(sched.accept(0, 9, 6, 100).has_value());
  engine.length[1] = engine.length[0];  // the caller copies the leader's state
  EXPECT_FALSE(sched.accept(1, 8, 6, 100).has_value());
  EXPECT_TRUE(sched.decoding(1));
  const std::vector<StepChunk>& chunks = sched.plan();
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].slot, 1);
  EXPECT_EQ(chunks[1].count, 1);
  EXPECT_EQ(*chunks[1].tokens, 8);
  EXPECT_EQ(sched.planned_prompt_tokens(), 0);
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

TEST(BatchScheduler, AdmissionKeepsArrivalOrderUnderPagePressure) {
  // A driver loop as the server's: one page kind of 10 pages, each request
  // reserving its prompt + max_new_tokens in pages of 4 tokens. The third
  // request (8 pages) must wait for the first two to end, and the small
  // fourth (1 page), which would fit beside them, must not overtake it.
  SchedulerOptions o;
  o.slots = 3;
  o.step_tokens = 16;
  o.pool_pages = {10};
  BatchScheduler sched(o);
  FakeEngine engine{{0, 0, 0}, 16};
  const std::vector<GenerationRequest> reqs = {request(8, 4), request(4, 4), request(24, 8), request(2, 2)};
  auto pages = [&](size_t r) {
    return std::vector<int64_t>{(int64_t(reqs[r].prompt.size()) + reqs[r].max_new_tokens + 3) / 4};
  };
  std::deque<size_t> waiting = {0, 1, 2, 3};
  std::vector<size_t> admitted, request_of(3);
  std::vector<int64_t> admitted_at_step;
  int64_t steps = 0, waits = 0;
  while (!waiting.empty() || sched.running_count() > 0) {
    while (!waiting.empty()) {
      const int32_t s = sched.place(pages(waiting.front()));
      if (s == BatchScheduler::kNoPages) ++waits;
      if (s < 0) break;
      sched.start(s, reqs[waiting.front()], pages(waiting.front()));
      request_of[s] = waiting.front();
      engine.length[s] = 0;
      admitted.push_back(waiting.front());
      admitted_at_step.push_back(steps);
      waiting.pop_front();
    }
    ASSERT_LE(sched.reserved_total(), 10);
    const std::vector<StepChunk> plan = sched.plan();
    ASSERT_FALSE(plan.empty());
    const std::vector<int32_t> rows = engine.step(plan);
    sched.advance();
    ++steps;
    for (int32_t s : rows)
      if (sched.accept(s, 0, engine.length[s], 100)) sched.end(s);
  }
  EXPECT_EQ(admitted, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_GT(waits, 0);
  // 0 and 1 (3 + 2 pages) start at once; 2 (8 pages) only once 0 ended; 3 with 2, not before it.
  EXPECT_EQ(admitted_at_step[0], 0);
  EXPECT_EQ(admitted_at_step[1], 0);
  EXPECT_GT(admitted_at_step[2], 0);
  EXPECT_EQ(admitted_at_step[3], admitted_at_step[2]);
}

TEST(BatchScheduler, DecodersAlwaysFitAndPromptsTakeWhatIsLeft) {
  // The smallest budget (one token per slot): two decoders leave one token a
  // step for the third sequence's prompt, which is fed one token at a time.
  SchedulerOptions o;
  o.slots = 3;
  o.step_tokens = 3;
  BatchScheduler sched(o);
  FakeEngine engine{{0, 0, 0}, 3};
  const GenerationRequest a = request(1, 10), b = request(1, 10), c = request(3, 10);
  sched.start(0, a, {});
  sched.start(1, b, {});
  engine.step(sched.plan());  // both prompts (one token each)
  sched.advance();
  EXPECT_FALSE(sched.accept(0, 9, engine.length[0], 100));
  EXPECT_FALSE(sched.accept(1, 9, engine.length[1], 100));
  sched.start(2, c, {});
  for (int64_t fed = 1; fed <= 3; ++fed) {
    const std::vector<StepChunk> plan = sched.plan();
    ASSERT_EQ(plan.size(), 3u);
    EXPECT_EQ(plan[0].count + plan[1].count, 2);  // the decoders first, one token each
    EXPECT_EQ(plan[2].slot, 2);
    EXPECT_EQ(plan[2].count, 1);
    EXPECT_EQ(plan[2].logits, fed == 3 ? LogitsWanted::kLast : LogitsWanted::kNone);
    EXPECT_EQ(sched.planned_prompt_tokens(), 1);
    engine.step(plan);
    sched.advance();
    EXPECT_EQ(sched.fed(2), fed);
    EXPECT_FALSE(sched.accept(0, 9, engine.length[0], 100));
    EXPECT_FALSE(sched.accept(1, 9, engine.length[1], 100));
  }
}

TEST(BatchScheduler, ForcedSequencesFeedTheirTokensAndNeverDecode) {
  // Scoring's sequences: all of a sequence's tokens are known. kLast gives
  // logits at the last token only (a prefix), kAll at every token (a
  // continuation); once fed, a sequence plans nothing.
  SchedulerOptions o;
  o.slots = 3;
  o.step_tokens = 5;
  BatchScheduler sched(o);
  FakeEngine engine{{0, 0, 0}, 5};
  const std::vector<int32_t> prefix = {1, 2, 3, 4, 5, 6, 7}, cont = {8, 9, 10};
  sched.start_forced(0, prefix, LogitsWanted::kLast);
  sched.start_forced(2, cont, LogitsWanted::kAll);
  std::vector<StepChunk> plan = sched.plan();
  ASSERT_EQ(plan.size(), 1u);  // slot 0's first 5 tokens fill the budget
  EXPECT_EQ(plan[0].count, 5);
  EXPECT_EQ(plan[0].logits, LogitsWanted::kNone);
  EXPECT_EQ(sched.fed(0), 0);  // where the chunk starts, until advance()
  engine.step(plan);
  sched.advance();
  plan = sched.plan();
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].count, 2);
  EXPECT_EQ(plan[0].tokens[0], 6);
  EXPECT_EQ(plan[0].logits, LogitsWanted::kLast);
  EXPECT_EQ(plan[1].slot, 2);
  EXPECT_EQ(plan[1].count, 3);
  EXPECT_EQ(plan[1].logits, LogitsWanted::kAll);
  engine.step(plan);
  sched.advance();
  EXPECT_TRUE(sched.plan().empty());  // both fed: no decode chunk for either
  EXPECT_EQ(engine.length, (std::vector<int64_t>{7, 0, 3}));
  EXPECT_EQ(sched.running_count(), 2);
  sched.end(0);
  sched.end(2);
  EXPECT_EQ(sched.running_count(), 0);
}

TEST(BatchScheduler, CallerReasonsAndTheRuleBeforeAStep) {
  SchedulerOptions o;
  o.slots = 2;
  o.step_tokens = 4;
  BatchScheduler sched(o);
  // Before a step: a request for no tokens ends (length) before its prompt runs; a withdrawn one is cancelled.
  const GenerationRequest none = request(3, 0), some = request(3, 5, {7});
  sched.start(0, none, {});
  sched.start(1, some, {});
  EXPECT_EQ(sched.ends_before_step(0, false), FinishReason::kLength);
  EXPECT_FALSE(sched.ends_before_step(1, false).has_value());
  EXPECT_EQ(sched.ends_before_step(1, true), FinishReason::kCancelled);
  sched.end(0);
  // A stop string (the caller's text) is a stop, before the token limit or the context end.
  EXPECT_FALSE(sched.accept(1, 4, 4, 100).has_value());
  EXPECT_EQ(sched.accept(1, 4, 5, 5, CallerStop::kStopString), FinishReason::kStop);
  sched.end(1);
  // A cancellation wins over everything, a stop id included.
  sched.start(1, some, {});
  EXPECT_EQ(sched.accept(1, 7, 4, 100, CallerStop::kCancelled), FinishReason::kCancelled);
  EXPECT_EQ(sched.generated(1), 1);  // the token was still recorded
  sched.end(1);
  // Without the caller's reasons the same token is a stop id.
  sched.start(1, some, {});
  EXPECT_EQ(sched.accept(1, 7, 4, 100), FinishReason::kStop);
}

// Every chunk of a sequence, prompt and decode, carries its request's LoRA
// adapter (StepChunk::lora), so sequences on different adapters share steps.
TEST(BatchScheduler, ChunksCarryTheirSequencesAdapter) {
  SchedulerOptions o;
  o.slots = 2;
  o.step_tokens = 8;
  BatchScheduler sched(o);
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 1;
  GenerationRequest adapted = request(3, 2), base = request(2, 2);
  adapted.lora = std::make_shared<const LoraAdapters>(c, LoraConfig{});
  sched.start(0, adapted, {});
  sched.start(1, base, {});
  for (int step = 0; step < 2; ++step) {
    const std::vector<StepChunk>& chunks = sched.plan();
    ASSERT_EQ(chunks.size(), 2u) << "step " << step;
    for (const StepChunk& ch : chunks)
      EXPECT_EQ(ch.lora, ch.slot == 0 ? adapted.lora.get() : nullptr) << "step " << step << " slot " << ch.slot;
    sched.advance();
    for (int32_t slot = 0; slot < 2; ++slot) sched.accept(slot, 5, 4 + step, 16);
  }
}

}  // namespace
}  // namespace zaya
