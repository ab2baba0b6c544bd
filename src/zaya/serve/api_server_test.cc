// The HTTP server on a free loopback port: a completion equals generate_text's
// for the same seed, whole and streamed; chat uses the template; bad requests,
// a missing API key and unknown paths get OpenAI errors; /metrics counts.
#include "zaya/serve/api_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "zaya/infer/generate_job.h"
#include "zaya/infer/scorer.h"
#include "zaya/infer/test_util.h"
#include "zaya/io/json_file.h"
#include "zaya/serve/test_util.h"

namespace zaya {
namespace {

struct Served : testing::ServedModel {
  explicit Served(const std::string& api_key = "")
      : ServedModel([&](ServerOptions& o, ZayaConfig&) { o.api_key = api_key; }) {
    start();
  }
  std::string expected(const std::string& prompt, int64_t tokens, uint64_t seed) const {
    TextRequest r;
    r.prompt = prompt;
    r.generation.prompt = encode_prompt(tok, prompt, true);
    r.generation.max_new_tokens = tokens;
    r.generation.sampling = {0.8, 40, 0.95, seed};
    r.generation.stop_ids = default_stop_ids(tok, im->config());
    GeneratorOptions go;
    go.sample_vocab = 400;
    return generate_text(*im, tok, {r}, go)[0].text;
  }
};

nlohmann::json body_json(const httplib::Result& res) { return parse_json(res->body, "response"); }

TEST(ApiServer, CompletionEqualsGenerateWholeAndStreamed) {
  Served s;
  auto cli = s.client();
  const std::string want = s.expected("In the beginning", 12, 3);
  const std::string body =
      R"({"prompt": "In the beginning", "max_tokens": 12, "seed": 3, "temperature": 0.8, "top_k": 40, "top_p": 0.95)";
  auto res = cli.Post("/v1/completions", body + "}", "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json j = body_json(res);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny-test");
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["usage"]["prompt_tokens"], int64_t(encode_prompt(s.tok, "In the beginning", true).size()));

  auto streamed = cli.Post("/v1/completions", body + R"(, "stream": true})", "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  std::string text;
  size_t at = 0;
  bool done = false, finish_seen = false;
  while ((at = streamed->body.find("data: ", at)) != std::string::npos) {
    const size_t end = streamed->body.find("\n\n", at);
    const std::string data = streamed->body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const nlohmann::json chunk = parse_json(data, "chunk");
    text += chunk["choices"][0]["text"].get<std::string>();
    finish_seen |= !chunk["choices"][0]["finish_reason"].is_null();
  }
  EXPECT_TRUE(done);
  EXPECT_TRUE(finish_seen);
  EXPECT_EQ(text, want);
}

// --spec ngram: a greedy completion's text is the plain one; usage (whole and
// the streamed usage chunk) and /metrics count the drafts.
TEST(ApiServer, SpeculativeDecodingReportsItsDrafts) {
  testing::ServedModel s([](ServerOptions& o, ZayaConfig&) { o.serving.spec.method = SpecMethod::kNgram; });
  s.start();
  auto cli = s.client();
  const std::string prompt = "And God said, Let there be light. And God said, Let there be light. And God said,";
  TextRequest r;
  r.prompt = prompt;
  r.generation.prompt = encode_prompt(s.tok, prompt, true);
  r.generation.max_new_tokens = 24;
  r.generation.sampling.temperature = 0;
  r.generation.stop_ids = default_stop_ids(s.tok, s.im->config());
  GeneratorOptions go;
  go.sample_vocab = 400;
  const std::string want = generate_text(*s.im, s.tok, {r}, go)[0].text;
  const std::string body = R"({"prompt": ")" + prompt + R"(", "max_tokens": 24, "temperature": 0)";
  auto res = cli.Post("/v1/completions", body + "}", "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json j = body_json(res);
  EXPECT_EQ(j["choices"][0]["text"], want);
  ASSERT_TRUE(j["usage"].contains("speculative")) << j.dump();
  const nlohmann::json& sp = j["usage"]["speculative"];
  EXPECT_GT(sp["drafts"].get<int64_t>(), 0);
  EXPECT_LE(sp["accepted_tokens"].get<int64_t>(), sp["draft_tokens"].get<int64_t>());
  auto streamed = cli.Post("/v1/completions", body + R"(, "stream": true, "stream_options": {"include_usage": true}})",
                           "application/json");
  ASSERT_TRUE(streamed);
  EXPECT_NE(streamed->body.find("\"speculative\""), std::string::npos);
  auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("zaya_spec_drafts_total " + std::to_string(2 * sp["drafts"].get<int64_t>())),
            std::string::npos)
      << metrics->body;
}

// --spec-model: a draft model with its own cache drafts for n = 2 greedy
// choices beside a sampled request (a mixed batch); the greedy text is the
// plain one in both choices, and usage counts the drafts.
TEST(ApiServer, DraftModelSpeculationKeepsTheGreedyText) {
  ZayaConfig dc = testing::small_test_config();
  dc.vocab_size = 448;
  dc.real_vocab_size = 400;
  dc.hidden = 32;
  dc.num_blocks = 2;
  dc.q_heads = 2;
  auto draft_weights = testing::random_model(dc, 53);
  auto draft = InferModel::from_model(*draft_weights);
  testing::ServedModel s([&](ServerOptions& o, ZayaConfig&) {
    o.serving.max_batch = 3;
    o.serving.spec.method = SpecMethod::kModel;
    o.serving.spec.draft_model = draft.get();
  });
  s.start();
  auto cli = s.client();
  const std::string prompt = "And God said, Let there be light";
  TextRequest r;
  r.prompt = prompt;
  r.generation.prompt = encode_prompt(s.tok, prompt, true);
  r.generation.max_new_tokens = 20;
  r.generation.sampling.temperature = 0;
  r.generation.stop_ids = default_stop_ids(s.tok, s.im->config());
  GeneratorOptions go;
  go.sample_vocab = 400;
  const std::string want = generate_text(*s.im, s.tok, {r}, go)[0].text;
  std::thread sampled([&] {
    auto c2 = s.client();
    auto res = c2.Post("/v1/completions", R"({"prompt": "In the", "max_tokens": 30, "temperature": 1, "seed": 3})",
                       "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
  });
  auto res =
      cli.Post("/v1/completions", R"({"prompt": ")" + prompt + R"(", "max_tokens": 20, "temperature": 0, "n": 2})",
               "application/json");
  sampled.join();
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json j = body_json(res);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][1]["text"], want);
  ASSERT_TRUE(j["usage"].contains("speculative")) << j.dump();
  EXPECT_GT(j["usage"]["speculative"]["drafts"].get<int64_t>(), 0);
}

TEST(ApiServer, ChatCompletionAndModels) {
  Served s;
  auto cli = s.client();
  auto res = cli.Post("/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "In the"}], "max_tokens": 5, "logprobs": true,
                          "top_logprobs": 2, "n": 2})",
                      "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json j = body_json(res);
  EXPECT_EQ(j["object"], "chat.completion");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const auto& content = j["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(int64_t(content.size()), j["choices"][0]["finish_reason"] == "length" ? 5 : int64_t(content.size()));
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(body_json(models)["data"][0]["id"], "tiny-test");
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// lm-evaluation-harness's loglikelihood body (M5): echoed prompt logprobs are
// the scorer's log p of each token given the ones before it (zaya score's values).
TEST(ApiServer, EchoLogprobsEqualTheScorer) {
  Served s;
  auto cli = s.client();
  const std::string text = "In the beginning God created";
  const std::vector<int32_t> ids = encode_prompt(s.tok, text, true);
  ASSERT_GE(ids.size(), 4u);
  const nlohmann::json body = {{"prompt", {ids, text}}, {"temperature", 0}, {"max_tokens", 1},
                               {"logprobs", 1},         {"echo", true},     {"seed", 1234}};
  auto res = cli.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json j = body_json(res);
  ASSERT_EQ(j["choices"].size(), 2u);
  // Each token's log p on its own: a group per position, scored without the per-token path.
  std::vector<ScoreGroup> groups;
  for (size_t k = 1; k < ids.size(); ++k) groups.push_back({{ids.begin(), ids.begin() + long(k)}, {{ids[k]}}, {}});
  const auto want = score_groups(*s.im, groups, ScorerOptions{});
  for (size_t c = 0; c < 2; ++c) {
    const nlohmann::json& choice = j["choices"][c];
    EXPECT_EQ(choice["index"], c);
    EXPECT_EQ(choice["text"].get<std::string>().substr(0, text.size()), text);
    const nlohmann::json& lp = choice["logprobs"];
    // The prompt's tokens, then the one generated token (which lm-eval's [ctxlen:-1] drops).
    ASSERT_EQ(lp["tokens"].size(), ids.size() + 1);
    ASSERT_EQ(lp["token_logprobs"].size(), ids.size() + 1);
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    EXPECT_EQ(lp["text_offset"][0], 0);
    for (size_t k = 1; k < ids.size(); ++k) {
      const double got = lp["token_logprobs"][k].get<double>();
      EXPECT_NEAR(got, want[k - 1][0].logprob, 1e-3) << "token " << k;
      EXPECT_EQ(lp["tokens"][k], s.tok.decode({ids[k]}));
      // lm-eval's greediness test: the token's logprob equals the best alternative's exactly when it is the argmax.
      const nlohmann::json& top = lp["top_logprobs"][k];
      ASSERT_EQ(top.size(), 1u);
      if (want[k - 1][0].greedy) {
        EXPECT_EQ(top.begin()->get<double>(), got) << "token " << k;
      }
      EXPECT_GE(top.begin()->get<double>(), got);
    }
    EXPECT_FALSE(lp["token_logprobs"][ids.size()].is_null());
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], int64_t(2 * ids.size()));
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
}

// Several prompts, n choices each: choice prompt_index * n + i, as OpenAI's; many stop strings are taken.
TEST(ApiServer, PromptBatchesGiveChoicesPromptByPrompt) {
  Served s;
  auto cli = s.client();
  auto res = cli.Post("/v1/completions",
                      R"({"prompt": ["In the", "And God"], "n": 2, "echo": true, "max_tokens": 0,
                          "stop": ["a", "b", "c", "d", "e", "f"]})",
                      "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json j = body_json(res);
  ASSERT_EQ(j["choices"].size(), 4u);
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(j["choices"][c]["index"], c);
    EXPECT_EQ(j["choices"][c]["text"], c < 2 ? "In the" : "And God");
    EXPECT_TRUE(j["choices"][c]["logprobs"].is_null());
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"],
            int64_t(2 * (encode_prompt(s.tok, "In the", true).size() + encode_prompt(s.tok, "And God", true).size())));
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
}

TEST(ApiServer, BadRequestsGetOpenAiErrors) {
  Served s("sekrit");
  auto cli = s.client();
  auto res = cli.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(body_json(res)["error"]["code"], "invalid_api_key");
  httplib::Headers auth = {{"Authorization", "Bearer sekrit"}};
  res = cli.Post("/v1/completions", auth, R"({"prompt": "x", "temperature": -1})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  const nlohmann::json e = body_json(res);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "temperature");
  res = cli.Post("/v1/completions", auth, "{", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_TRUE(body_json(res)["error"]["param"].is_null());
  res = cli.Get("/v1/nothing", auth);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_NE(body_json(res)["error"]["message"].get<std::string>().find("not an endpoint"), std::string::npos);
  res = cli.Post("/v1/completions", auth, std::string(2 << 20, ' '), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  // /health and /metrics need no key; the metrics counted the answers.
  res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("zaya_requests_total{endpoint=\"/v1/completions\",status=\"400\"} 2"), std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("zaya_requests_total{endpoint=\"/v1/completions\",status=\"401\"} 1"), std::string::npos);
}

}  // namespace
}  // namespace zaya
