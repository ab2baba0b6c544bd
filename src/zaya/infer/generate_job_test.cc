// Text generation over the generator: streamed pieces make each completion,
// every request ends at its own stop strings and ids (nothing after a stop is
// streamed), batching changes no request, the full-sequence path gives the same
// completion, and completions can be handed on in request order.
#include "zaya/infer/generate_job.h"

#include <gtest/gtest.h>

#include "zaya/data/test_util.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

// The test model, with the test tokenizer's 400 pieces as its real vocabulary.
ZayaConfig text_config() {
  ZayaConfig c = testing::small_test_config();
  c.vocab_size = 512;
  c.real_vocab_size = 400;
  return c;
}

TextRequest request(const Tokenizer& tok, const std::string& prompt, uint64_t seed) {
  TextRequest r;
  r.prompt = prompt;
  r.generation.prompt = encode_prompt(tok, prompt, true);
  r.generation.max_new_tokens = 24;
  r.generation.sampling.temperature = 0.9;
  r.generation.sampling.top_k = 0;
  r.generation.sampling.top_p = 1;
  r.generation.sampling.seed = seed;
  return r;
}

// `chars` whole characters of `text` from the first character start at or after byte `from`.
std::string chars_at(const std::string& text, size_t from, int chars) {
  auto continuation = [&](size_t i) { return i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
  size_t at = from;
  while (continuation(at)) ++at;
  size_t end = at;
  for (int k = 0; k < chars && end < text.size(); ++k)
    for (++end; continuation(end);) ++end;
  return text.substr(at, end - at);
}

// What a job streamed, per request, and whether anything came after its finish.
struct Recorder {
  std::vector<std::string> streamed;
  std::vector<int> finished;
  bool text_after_finish = false;
  explicit Recorder(size_t n) : streamed(n), finished(n, 0) {}
  TextCallbacks callbacks() {
    TextCallbacks cb;
    cb.on_text = [this](size_t i, std::string_view piece) {
      EXPECT_FALSE(piece.empty());
      text_after_finish |= finished[i] != 0;
      streamed[i] += piece;
    };
    cb.on_finish = [this](size_t i, const TextCompletion&) { ++finished[i]; };
    return cb;
  }
};

class GenerateJob : public ::testing::Test {
 protected:
  GenerateJob()
      : tok_(Tokenizer::load(testing::small_tokenizer_path())),
        model_(testing::random_model(text_config(), 51)),
        im_(InferModel::from_model(*model_)) {}
  GeneratorOptions options() const {
    GeneratorOptions o;
    o.max_batch = 2;
    o.step_tokens = 8;
    o.sample_vocab = tok_.vocab_size();
    return o;
  }
  Tokenizer tok_;
  std::unique_ptr<ZayaModel> model_;
  std::unique_ptr<InferModel> im_;
};

TEST_F(GenerateJob, StreamedPiecesMakeEachCompletion) {
  std::vector<TextRequest> reqs = {request(tok_, "In the beginning", 1), request(tok_, "And God said", 2),
                                   request(tok_, "Blessed", 3)};
  Recorder rec(reqs.size());
  GenerationStats st;
  const std::vector<TextCompletion> out = generate_text(*im_, tok_, reqs, options(), rec.callbacks(), &st);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(st.generated_tokens, 3 * 24);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].tokens.size(), 24u);
    EXPECT_EQ(out[i].finish, FinishReason::kLength);
    EXPECT_EQ(out[i].text, tok_.decode(out[i].tokens));
    EXPECT_FALSE(out[i].text.empty());
    EXPECT_EQ(rec.streamed[i], out[i].text) << "request " << i;
    EXPECT_EQ(rec.finished[i], 1);
  }
  EXPECT_FALSE(rec.text_after_finish);
}

TEST_F(GenerateJob, EachRequestEndsAtItsOwnStops) {
  std::vector<TextRequest> reqs = {request(tok_, "In the beginning", 4), request(tok_, "And God said", 5),
                                   request(tok_, "Blessed", 6), request(tok_, "And", 7)};
  const std::vector<TextCompletion> free = generate_text(*im_, tok_, reqs, options());
  for (const TextCompletion& f : free) ASSERT_GT(f.text.size(), 8u);
  // 0: one stop string from the middle; 1: two, only the second in the text;
  // 2: a stop at the very first character; 3: a stop id (its 6th token).
  const std::string mid = chars_at(free[0].text, free[0].text.size() / 2, 2);
  reqs[0].stop_strings = {mid};
  const std::string late = chars_at(free[1].text, free[1].text.size() * 2 / 3, 3);
  reqs[1].stop_strings = {"\x01never\x02", late};
  reqs[2].stop_strings = {chars_at(free[2].text, 0, 1)};
  reqs[3].generation.stop_ids = {free[3].tokens[5]};
  Recorder rec(reqs.size());
  const std::vector<TextCompletion> out = generate_text(*im_, tok_, reqs, options(), rec.callbacks());
  EXPECT_EQ(out[0].text, free[0].text.substr(0, free[0].text.find(mid)));
  EXPECT_EQ(out[1].text, free[1].text.substr(0, free[1].text.find(late)));
  EXPECT_EQ(out[2].text, "");
  const size_t stop_at =
      std::find(free[3].tokens.begin(), free[3].tokens.end(), free[3].tokens[5]) - free[3].tokens.begin();
  EXPECT_EQ(out[3].tokens, std::vector<int32_t>(free[3].tokens.begin(), free[3].tokens.begin() + stop_at + 1));
  EXPECT_EQ(out[3].text, tok_.decode(std::vector<int32_t>(free[3].tokens.begin(), free[3].tokens.begin() + stop_at)));
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].finish, FinishReason::kStop) << "request " << i;
    EXPECT_EQ(rec.streamed[i], out[i].text) << "request " << i;
    // The same tokens as without the stop, up to where it ended the request.
    ASSERT_LE(out[i].tokens.size(), free[i].tokens.size());
    EXPECT_EQ(out[i].tokens,
              std::vector<int32_t>(free[i].tokens.begin(), free[i].tokens.begin() + out[i].tokens.size()));
  }
  EXPECT_LT(out[2].tokens.size(), free[2].tokens.size());
  EXPECT_FALSE(rec.text_after_finish);
  // Alone, each request gives the same completion as in the batch.
  for (size_t i = 0; i < reqs.size(); ++i) {
    const TextCompletion alone = generate_text(*im_, tok_, {reqs[i]}, GeneratorOptions{})[0];
    EXPECT_EQ(alone.text, out[i].text) << "request " << i;
    EXPECT_EQ(alone.tokens, out[i].tokens) << "request " << i;
  }
}

TEST_F(GenerateJob, FullSequencePathGivesTheSameCompletion) {
  TextRequest r = request(tok_, "And God said", 8);
  const TextCompletion free = generate_text(*im_, tok_, {r}, options())[0];
  ASSERT_GT(free.text.size(), 12u);
  for (const std::vector<std::string>& stops : {std::vector<std::string>{}, {chars_at(free.text, 10, 2)}}) {
    r.stop_strings = stops;
    const TextCompletion cached = generate_text(*im_, tok_, {r}, options())[0];
    Recorder rec(1);
    const TextCompletion full = generate_text_full_sequence(*model_, tok_, r, rec.callbacks());
    EXPECT_EQ(full.text, cached.text);
    EXPECT_EQ(full.tokens, cached.tokens);
    EXPECT_EQ(full.finish, cached.finish);
    EXPECT_EQ(rec.streamed[0], full.text);
    EXPECT_EQ(rec.finished[0], 1);
  }
}

// ignore_eos (--ignore-eos, the API's "ignore_eos"): a request whose stop id
// is a token its text emits early stops there without it, and with it runs
// to its token limit with the free run's tokens; a stop string still ends it.
TEST_F(GenerateJob, IgnoringEosRunsToTheTokenLimit) {
  const ZayaConfig c = text_config();
  TextRequest r = request(tok_, "And God said", 12);
  ASSERT_EQ(prepare_text_request(r, tok_, c, true), "");
  r.generation.stop_ids = {};
  const TextCompletion free = generate_text(*im_, tok_, {r}, options())[0];
  ASSERT_EQ(free.tokens.size(), 24u);
  r.generation.stop_ids = {free.tokens[5]};  // an "EOS" met at the 6th token at the latest
  TextRequest stopping = r, past = r;
  past.ignore_eos = true;
  ASSERT_EQ(prepare_text_request(stopping, tok_, c, true), "");
  ASSERT_EQ(prepare_text_request(past, tok_, c, true), "");
  EXPECT_TRUE(past.generation.stop_ids.empty());
  const TextCompletion stopped = generate_text(*im_, tok_, {stopping}, options())[0];
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_LE(stopped.tokens.size(), 6u);
  for (const TextCompletion& ran :
       {generate_text(*im_, tok_, {past}, options())[0], generate_text_full_sequence(*model_, tok_, past, {})}) {
    EXPECT_EQ(ran.finish, FinishReason::kLength);
    EXPECT_EQ(ran.tokens, free.tokens);
    EXPECT_EQ(ran.text, free.text);
  }
  past.stop_strings = {chars_at(free.text, free.text.size() / 2, 2)};
  const TextCompletion cut = generate_text(*im_, tok_, {past}, options())[0];
  EXPECT_EQ(cut.finish, FinishReason::kStop);
  EXPECT_EQ(cut.text, free.text.substr(0, free.text.find(past.stop_strings[0])));
}

TEST(InOrderCompletions, HandsOnEachAsSoonAsAllBeforeItAreDone) {
  std::vector<std::pair<size_t, std::string>> emitted;
  InOrderCompletions in_order(4, [&](size_t i, const TextCompletion& c) { emitted.emplace_back(i, c.text); });
  in_order.finished(2, {"two", {}, FinishReason::kLength});
  EXPECT_TRUE(emitted.empty());
  in_order.finished(0, {"zero", {}, FinishReason::kLength});
  EXPECT_EQ(emitted, (std::vector<std::pair<size_t, std::string>>{{0, "zero"}}));
  in_order.finished(3, {"three", {}, FinishReason::kStop});
  EXPECT_EQ(in_order.emitted(), 1u);
  in_order.finished(1, {"one", {}, FinishReason::kStop});
  EXPECT_EQ(emitted, (std::vector<std::pair<size_t, std::string>>{{0, "zero"}, {1, "one"}, {2, "two"}, {3, "three"}}));
  EXPECT_NE(testing::error_of([&] { in_order.finished(1, {}); }).find("request 1 finished twice"), std::string::npos);
}

}  // namespace
}  // namespace zaya
