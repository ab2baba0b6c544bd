// The server's batching loop: requests submitted while others run give the
// text and tokens generate_text gives each alone, a cancelled channel frees
// its slot, a full queue refuses, and log probabilities come with greedy tokens.
#include "zaya/infer/serving_loop.h"

#include <gtest/gtest.h>

#include <thread>

#include "zaya/data/test_util.h"
#include "zaya/infer/generate_job.h"
#include "zaya/infer/json_schema.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

ZayaConfig text_config() {
  ZayaConfig c = testing::small_test_config();
  c.vocab_size = 512;
  c.real_vocab_size = 400;
  return c;
}

TextRequest request(const Tokenizer& tok, const std::string& prompt, uint64_t seed, int64_t tokens) {
  TextRequest r;
  r.prompt = prompt;
  r.generation.prompt = encode_prompt(tok, prompt, true);
  r.generation.max_new_tokens = tokens;
  r.generation.sampling.temperature = 0.9;
  r.generation.sampling.top_k = 0;
  r.generation.sampling.top_p = 1;
  r.generation.sampling.seed = seed;
  return r;
}

struct Collected {
  std::vector<std::string> text;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<FinishReason> finish;
  std::vector<float> logprob;
  std::vector<int32_t> top_id;
};

Collected collect(ServeChannel& ch) {
  Collected c;
  c.text.resize(ch.choices());
  c.tokens.resize(ch.choices());
  c.finish.resize(ch.choices(), FinishReason::kLength);
  size_t done = 0;
  std::vector<ServeEvent> events;
  while (done < ch.choices()) {
    events.clear();
    if (!ch.wait(events, 30.0)) ADD_FAILURE() << "no event in 30 s";
    for (const ServeEvent& e : events) {
      EXPECT_NE(e.kind, ServeEvent::Kind::kError) << e.text;
      c.text[e.choice] += e.text;
      if (e.kind == ServeEvent::Kind::kToken) {
        c.tokens[e.choice].push_back(e.token);
        c.logprob.push_back(e.logprob);
        if (!e.top.empty()) c.top_id.push_back(e.top[0].first);
      } else {
        c.finish[e.choice] = e.finish;
        EXPECT_EQ(e.tokens, int64_t(c.tokens[e.choice].size()));
        ++done;
      }
    }
  }
  return c;
}

TEST(ServingLoop, RequestsJoiningTheBatchGiveWhatTheyGiveAlone) {
  const ZayaConfig c = text_config();
  auto model = testing::random_model(c, 41);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  std::vector<TextRequest> reqs = {request(tok, "In the beginning", 1, 20), request(tok, "And God said, Let", 2, 9),
                                   request(tok, "A", 3, 14), request(tok, "The earth was without form", 4, 17)};
  reqs[1].stop_strings = {"e"};
  reqs[2].generation.stop_ids = {tok.eos_id(), 7, 9, 11, 13};
  ServingOptions o;
  o.max_batch = 2;
  o.step_tokens = 4;  // prompts in several chunks, beside decoding sequences
  o.sample_vocab = 400;
  ServingLoop loop(*im, tok, o);
  std::vector<std::shared_ptr<ServeChannel>> channels;
  for (const TextRequest& r : reqs) {
    channels.push_back(loop.submit({r}));
    ASSERT_TRUE(channels.back());
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  GeneratorOptions alone;
  alone.sample_vocab = 400;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Collected got = collect(*channels[i]);
    const TextCompletion want = generate_text(*im, tok, {reqs[i]}, alone)[0];
    EXPECT_EQ(got.text[0], want.text) << i;
    EXPECT_EQ(got.tokens[0], want.tokens) << i;
    EXPECT_EQ(got.finish[0], want.finish) << i;
  }
  const ServingCounters n = loop.counters();
  EXPECT_EQ(n.running, 0);
  EXPECT_EQ(n.waiting, 0);
  int64_t prompt = 0;
  for (const TextRequest& r : reqs) prompt += int64_t(r.generation.prompt.size());
  EXPECT_EQ(n.prefill_tokens, prompt);
  EXPECT_GT(n.generated_tokens, 0);
}

// Speculative decoding in the server (--spec ngram): greedy requests, with a
// stop string and n > 1 among them, give plain decoding's text and tokens; the
// drafts are counted. Steps of at most 4 tokens keep every row on the decode
// kernels in both runs.
TEST(ServingLoop, SpeculativeDecodingGivesPlainGreedyText) {
  const ZayaConfig c = text_config();
  auto model = testing::random_model(c, 46);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::string rep = "And God said, Let there be light. And God said, Let there be light. And God said, Let";
  std::vector<TextRequest> reqs = {request(tok, rep, 1, 30), request(tok, "In the beginning God", 2, 24),
                                   request(tok, rep + " there", 3, 26)};
  for (TextRequest& r : reqs) r.generation.sampling.temperature = 0;
  ServingOptions o;
  o.max_batch = 3;
  o.step_tokens = 4;
  o.sample_vocab = 400;
  o.spec.method = SpecMethod::kNgram;
  o.spec.tokens = 3;
  GeneratorOptions alone;
  alone.sample_vocab = 400;
  alone.step_tokens = 4;
  const TextCompletion free_run = generate_text(*im, tok, {reqs[0]}, alone)[0];
  reqs[0].stop_strings = {free_run.text.substr(free_run.text.size() / 2, 3)};  // ends inside the run
  ServingLoop loop(*im, tok, o);
  std::vector<std::shared_ptr<ServeChannel>> channels;
  for (const TextRequest& r : reqs) channels.push_back(loop.submit({r}));
  channels.push_back(loop.submit(repeat_with_seeds(reqs[2], 2)));
  for (size_t i = 0; i < channels.size(); ++i) {
    ASSERT_TRUE(channels[i]);
    const Collected got = collect(*channels[i]);
    const TextCompletion want = generate_text(*im, tok, {reqs[std::min<size_t>(i, 2)]}, alone)[0];
    for (size_t k = 0; k < got.text.size(); ++k) {
      EXPECT_EQ(got.text[k], want.text) << i << " " << k;
      EXPECT_EQ(got.tokens[k], want.tokens) << i << " " << k;
      EXPECT_EQ(got.finish[k], want.finish) << i << " " << k;
    }
  }
  EXPECT_EQ(generate_text(*im, tok, {reqs[0]}, alone)[0].finish, FinishReason::kStop);
  const ServingCounters n = loop.counters();
  EXPECT_GT(n.spec_drafts, 0);
  EXPECT_GT(n.spec_accepted_tokens, 0);
  EXPECT_EQ(n.running, 0);
}

// response_format's constraint in the loop (token_constraint.h): constrained
// sequences, with speculative decoding on, write JSON of the schema (whole
// when they stop, a prefix the automaton continues when cut), and an
// unconstrained request batched beside them gives its text alone.
TEST(ServingLoop, ConstrainedSequencesWriteTheirSchemaBesideFreeOnes) {
  ZayaConfig c = text_config();
  c.max_position = 512;
  auto model = testing::random_model(c, 47);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const JsonSchemaGrammar schema = compile_json_schema(
      nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":{"enum":["x","yy"]},"b":{"type":"integer"},
          "c":{"type":"array","items":{"type":"boolean"},"maxItems":2}},"required":["a","b","c"]})"),
      "schema");
  ASSERT_EQ(schema.error, "");
  auto grammar = std::make_shared<const JsonGrammar>(schema.grammar);
  TextRequest json_req = request(tok, "In the beginning", 5, 400);
  json_req.generation.stop_ids = {tok.eos_id()};
  json_req.constraint = json_constraint(grammar, std::make_shared<const TokenTexts>(tok), json_req.generation.stop_ids);
  TextRequest free_req = request(tok, "And God said, Let there be light. And God said, Let", 6, 30);
  free_req.generation.sampling.temperature = 0;
  ServingOptions o;
  o.max_batch = 4;
  o.step_tokens = 8;
  o.sample_vocab = 400;
  o.spec.method = SpecMethod::kNgram;
  o.spec.tokens = 3;
  ServingLoop loop(*im, tok, o);
  auto constrained = loop.submit(repeat_with_seeds(json_req, 3));
  auto plain = loop.submit({free_req});
  ASSERT_TRUE(constrained && plain);
  const Collected got = collect(*constrained);
  int64_t stopped = 0;
  for (size_t k = 0; k < got.text.size(); ++k) {
    if (got.finish[k] == FinishReason::kStop) {
      ++stopped;
      EXPECT_TRUE(json_accepts(*grammar, got.text[k])) << got.text[k];
      EXPECT_TRUE(nlohmann::json::accept(got.text[k])) << got.text[k];  // nlohmann's parser agrees
    } else {
      JsonState st = json_start(*grammar);
      for (unsigned char ch : got.text[k]) st = json_step(*grammar, st, ch);
      EXPECT_FALSE(st.threads.empty()) << got.text[k];
    }
  }
  EXPECT_GE(stopped, 1);  // (seed 5: all three end inside the limit) the whole-value checks ran
  GeneratorOptions alone;
  alone.sample_vocab = 400;
  alone.step_tokens = 8;
  EXPECT_EQ(collect(*plain).tokens[0], generate_text(*im, tok, {free_req}, alone)[0].tokens);
}

TEST(ServingLoop, SeveralChoicesSampleWithConsecutiveSeeds) {
  const ZayaConfig c = text_config();
  auto model = testing::random_model(c, 42);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  ServingOptions o;
  o.max_batch = 3;
  ServingLoop loop(*im, tok, o);
  const std::vector<TextRequest> reqs = repeat_with_seeds(request(tok, "In the", 10, 12), 3);
  auto ch = loop.submit(reqs);
  ASSERT_TRUE(ch);
  const Collected got = collect(*ch);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(got.tokens[i], generate_text(*im, tok, {reqs[i]}, GeneratorOptions{})[0].tokens) << i;
}

// Prefix caching: a repeated prompt gives the same tokens and is prefilled
// only past its last snapshot; a longer prompt sharing the prefix starts from
// it too; with the cache off every prompt token runs.
TEST(ServingLoop, RepeatedPrefixIsNotRecomputed) {
  const ZayaConfig c = text_config();
  auto model = testing::random_model(c, 45);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::string text = "In the beginning God created the heaven and the earth. And the earth was without form";
  const TextRequest first = request(tok, text, 8, 10), longer = request(tok, text + ", and void; and darkness", 9, 6);
  const int64_t P = int64_t(first.generation.prompt.size()), P2 = int64_t(longer.generation.prompt.size());
  ASSERT_GT(P, 17);
  for (const int64_t budget : {int64_t(0), int64_t(1) << 26}) {
    ServingOptions o;
    o.max_batch = 2;
    o.prefix_cache_bytes = budget;
    o.prefix_block = 8;
    ServingLoop loop(*im, tok, o);
    auto run = [&](const TextRequest& r) {
      auto ch = loop.submit({r});
      EXPECT_TRUE(ch);
      return collect(*ch).tokens[0];
    };
    const std::vector<int32_t> a = run(first);
    const int64_t after_first = loop.counters().prefill_tokens;
    EXPECT_EQ(loop.counters().prefix_snapshots > 0, budget > 0);
    const std::vector<int32_t> b = run(first);
    const int64_t after_second = loop.counters().prefill_tokens;
    const std::vector<int32_t> l = run(longer);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, generate_text(*im, tok, {first}, GeneratorOptions{})[0].tokens);
    EXPECT_EQ(l, generate_text(*im, tok, {longer}, GeneratorOptions{})[0].tokens);
    EXPECT_EQ(after_first, P);
    if (budget == 0) {
      EXPECT_EQ(after_second - after_first, P);
      EXPECT_EQ(loop.counters().prefix_hit_tokens, 0);
    } else {
      const int64_t held = (P - 1) / 8 * 8;  // the last snapshot before the prompt's end
      EXPECT_EQ(after_second - after_first, P - held);
      EXPECT_LT(loop.counters().prefill_tokens - after_second, P2 - 8);
      EXPECT_GE(loop.counters().prefix_hit_tokens, held + 8);
    }
  }
}

// A KV pool that holds one request at its longest (and snapshots beside it):
// requests beyond it wait in the queue and are served in turn, each with the
// tokens it gives alone; one that could never fit is refused with its reason;
// every reservation is returned.
TEST(ServingLoop, FullKvPoolQueuesRequestsAndRefusesOneThatCannotFit) {
  const ZayaConfig c = text_config();
  auto model = testing::random_model(c, 46);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  std::vector<TextRequest> reqs;
  for (int i = 0; i < 3; ++i)
    reqs.push_back(request(tok, i == 1 ? "And God said, Let there be light" : "In the beginning", 30 + i, 12));
  int64_t longest = 0;
  for (const TextRequest& r : reqs)
    longest = std::max<int64_t>(longest, int64_t(r.generation.prompt.size()) + r.generation.max_new_tokens);
  EngineOptions eo;
  eo.max_context = 64;
  eo.page_tokens = 8;
  InferenceEngine probe(*im, eo);
  ServingOptions o;
  o.max_batch = 3;
  o.max_context = 64;
  o.prefix_block = 8;
  o.prefix_cache_bytes = 1;  // caching on; the pool is kv_cache_bytes
  o.kv_cache_bytes = (longest + 7) / 8 * probe.page_bytes(0);
  ServingLoop loop(*im, tok, o);
  EXPECT_EQ(loop.counters().kv_pages, (longest + 7) / 8);
  std::vector<std::shared_ptr<ServeChannel>> channels;
  for (const TextRequest& r : reqs) {
    channels.push_back(loop.submit({r}));
    ASSERT_TRUE(channels.back());
  }
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(collect(*channels[i]).tokens[0], generate_text(*im, tok, {reqs[i]}, GeneratorOptions{})[0].tokens) << i;
  const ServingCounters n = loop.counters();
  EXPECT_GT(n.waiting_for_pages, 0);
  EXPECT_EQ(n.kv_pages_reserved, 0);
  EXPECT_EQ(n.running, 0);
  TextRequest big = request(tok, "In the beginning", 1, 60);
  try {
    loop.submit({big});
    ADD_FAILURE() << "a request larger than the pool was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV pages"), std::string::npos) << e.what();
  }
}

TEST(ServingLoop, CancelledChannelFreesItsSlot) {
  const ZayaConfig c = text_config();
  auto model = testing::random_model(c, 43);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  ServingOptions o;
  o.max_batch = 1;
  o.max_waiting = 0;
  ServingLoop loop(*im, tok, o);
  // The cancel races the loop: on a busy machine the 100 tokens can all come
  // before it lands, and the sequence ends by its length. Such a try proves
  // nothing, so it is tried again (a bounded number of times); the slot must
  // be free after a try that did end cancelled.
  int64_t cancelled = 0;
  for (int attempt = 0; attempt < 8 && cancelled == 0; ++attempt) {
    TextRequest long_one = request(tok, "In", 5 + uint64_t(attempt), 100);
    long_one.generation.stop_ids.clear();
    auto ch = loop.submit({long_one});
    ASSERT_TRUE(ch);
    // One slot, no queue: a second request is refused while the first runs.
    EXPECT_FALSE(loop.submit({request(tok, "And", 6, 3)}));
    std::vector<ServeEvent> events;
    ASSERT_TRUE(ch->wait(events, 30.0));
    ch->cancel();
    bool finished = false;
    while (!finished) {
      for (const ServeEvent& e : events)
        if (e.kind == ServeEvent::Kind::kFinish) {
          finished = true;
          if (e.finish == FinishReason::kCancelled) {
            EXPECT_LT(e.tokens, 100);
            ++cancelled;
          } else {
            EXPECT_EQ(e.finish, FinishReason::kLength);
            EXPECT_EQ(e.tokens, 100);
          }
        }
      events.clear();
      if (!finished) {
        ASSERT_TRUE(ch->wait(events, 30.0));
      }
    }
  }
  ASSERT_EQ(cancelled, 1) << "no try ended cancelled: the loop finished 100 tokens before each cancel";
  EXPECT_EQ(loop.counters().cancelled, 1);
  auto next = loop.submit({request(tok, "And", 6, 3)});
  ASSERT_TRUE(next);
  EXPECT_EQ(collect(*next).tokens[0].size(), 3u);
}

TEST(ServingLoop, LogprobsOfGreedyTokensAreTheMostLikely) {
  const ZayaConfig c = text_config();
  auto model = testing::random_model(c, 44);
  auto im = InferModel::from_model(*model);
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  ServingLoop loop(*im, tok, ServingOptions{});
  TextRequest r = request(tok, "In the beginning", 0, 6);
  r.generation.sampling.temperature = 0;
  auto ch = loop.submit({r}, 2);
  ASSERT_TRUE(ch);
  const Collected got = collect(*ch);
  ASSERT_EQ(got.top_id.size(), got.tokens[0].size());
  for (size_t i = 0; i < got.tokens[0].size(); ++i) {
    EXPECT_EQ(got.top_id[i], got.tokens[0][i]);
    EXPECT_LT(got.logprob[i], 0.0f);
  }
  // A request that cannot run is refused with its reason.
  TextRequest empty = r;
  empty.generation.prompt.clear();
  EXPECT_THROW(loop.submit({empty}), Error);
}

}  // namespace
}  // namespace zaya
