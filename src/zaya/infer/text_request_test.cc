// Text requests: default stop ids, prompts encoded with BOS, seeds per sample.
#include "zaya/infer/text_request.h"

#include <gtest/gtest.h>

#include "zaya/data/test_util.h"

namespace zaya {
namespace {

TEST(TextRequest, DefaultStopIdsAreTheTokenizersAndTheConfigsEos) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());  // eos 1
  ZayaConfig c;
  c.eos_token_id = 1;
  EXPECT_EQ(default_stop_ids(tok, c), std::vector<int32_t>{1});
  c.eos_token_id = 106;  // a checkpoint whose config names another end token
  EXPECT_EQ(default_stop_ids(tok, c), (std::vector<int32_t>{1, 106}));
  c.eos_token_ids = {106, 1, 107};  // config.json's eos list: every id stops, each once
  EXPECT_EQ(default_stop_ids(tok, c), (std::vector<int32_t>{1, 106, 107}));
}

TEST(TextRequest, PromptsStartWithBosUnlessAskedNot) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::vector<int32_t> ids = tok.encode("In the beginning");
  std::vector<int32_t> with_bos = {tok.bos_id()};
  with_bos.insert(with_bos.end(), ids.begin(), ids.end());
  EXPECT_EQ(encode_prompt(tok, "In the beginning", true), with_bos);
  EXPECT_EQ(encode_prompt(tok, "In the beginning", false), ids);
  EXPECT_EQ(encode_prompt(tok, "", true), std::vector<int32_t>{tok.bos_id()});
  EXPECT_EQ(testing::error_of([&] { encode_prompt(tok, "", false); }),
            "the prompt is empty and --no-bos leaves no token to start from");
}

TEST(TextRequest, PreparingEncodesAndSaysWhyARequestCannotRun) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  ZayaConfig c;
  c.vocab_size = 512;
  c.max_position = 8;
  TextRequest r;
  r.prompt = "And";
  EXPECT_EQ(prepare_text_request(r, tok, c, true), "");
  EXPECT_EQ(r.generation.prompt, encode_prompt(tok, "And", true));
  r.prompt = "In the beginning God created the heaven and the earth.";
  const size_t n = encode_prompt(tok, r.prompt, true).size();
  ASSERT_GE(n, 8u);
  EXPECT_EQ(prepare_text_request(r, tok, c, true),
            "the prompt (" + std::to_string(n) + " tokens) leaves no room under max_position_embeddings (8)");
  r.prompt = "And";
  const std::string and_tokens = std::to_string(encode_prompt(tok, "And", true).size());
  EXPECT_EQ(prepare_text_request(r, tok, c, true, 2),
            "the prompt (" + and_tokens + " tokens) leaves no room under --max-context (2)");
  r.prompt = "";
  EXPECT_EQ(prepare_text_request(r, tok, c, false), "the prompt is empty and --no-bos leaves no token to start from");
  EXPECT_EQ(prepare_text_request(r, tok, c, true), "");  // BOS alone: an unconditional sample
  EXPECT_EQ(r.generation.prompt, std::vector<int32_t>{tok.bos_id()});
}

TEST(TextRequest, SamplesOfOnePromptTakeConsecutiveSeeds) {
  TextRequest r;
  r.prompt = "And";
  r.generation.sampling.seed = 40;
  r.stop_strings = {"."};
  const std::vector<TextRequest> copies = repeat_with_seeds(r, 3);
  ASSERT_EQ(copies.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(copies[i].generation.sampling.seed, 40 + i);
    EXPECT_EQ(copies[i].prompt, "And");
    EXPECT_EQ(copies[i].stop_strings, std::vector<std::string>{"."});
  }
}

}  // namespace
}  // namespace zaya
