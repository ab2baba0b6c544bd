// The tokenizer endpoints as lm-evaluation-harness's remote tokenizer calls
// them: special-token text is one id, /tokenize and /detokenize round-trip,
// /tokenizer_info names the special tokens, and bad bodies get 400s naming
// the field.
#include "zaya/serve/tokenizer_api.h"

#include <gtest/gtest.h>

#include "zaya/data/test_util.h"
#include "zaya/io/json_file.h"
#include "zaya/serve/test_util.h"

namespace zaya {
namespace {

std::vector<int32_t> joined_ids(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(SpecialTokenEncoder, SpecialTextIsOneIdAndTheRestIsEncodedOnItsOwn) {
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const SpecialTokenEncoder enc(tok);
  ASSERT_EQ(tok.id_to_piece(tok.bos_id()), "<bos>");
  ASSERT_EQ(tok.id_to_piece(tok.eos_id()), "<eos>");
  EXPECT_EQ(enc.encode("<eos>"), std::vector<int32_t>{tok.eos_id()});
  EXPECT_EQ(enc.encode("<bos>"), std::vector<int32_t>{tok.bos_id()});
  EXPECT_EQ(enc.encode("<unk>"), std::vector<int32_t>{tok.unk_id()});
  EXPECT_EQ(enc.encode("<bos>In the beginning<eos>And God"),
            joined_ids({{tok.bos_id()}, tok.encode("In the beginning"), {tok.eos_id()}, tok.encode("And God")}));
  EXPECT_EQ(enc.encode("<bos><bos>x"), joined_ids({{tok.bos_id(), tok.bos_id()}, tok.encode("x")}));
  // Text without special tokens (and near misses) is the tokenizer's own encoding.
  for (const char* text : {"In the beginning", "<bo", "<bos", "bos>", "<<bos", "<", "", "<BOS>", "a<eos"})
    EXPECT_EQ(enc.encode(text), tok.encode(text)) << text;
  EXPECT_EQ(enc.encode("<<bos>"), joined_ids({tok.encode("<"), {tok.bos_id()}}));
  // The specials are the control pieces and the unknown piece.
  std::vector<int32_t> ids;
  for (const auto& [text, id] : enc.specials()) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int32_t>{tok.pad_id(), tok.eos_id(), tok.bos_id(), tok.unk_id()}));
}

struct TokenizerServed : testing::ServedModel {
  explicit TokenizerServed(const std::string& key = "")
      : ServedModel([&](ServerOptions& o, ZayaConfig&) { o.api_key = key; }) {
    start();
  }
};

nlohmann::json tokenizer_post(httplib::Client& cli, const std::string& path, const std::string& body, int want_status) {
  auto res = cli.Post(path, body, "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return {};
  EXPECT_EQ(res->status, want_status) << path << " " << body << " -> " << res->body;
  return parse_json(res->body, path);
}

// What lm_eval.utils.RemoteTokenizer sends and reads (lm-eval 0.4.13).
TEST(TokenizerApi, AnswersWhatTheHarnessRemoteTokenizerSends) {
  TokenizerServed s;
  auto cli = s.client();
  auto info = cli.Get("/tokenizer_info");
  ASSERT_TRUE(info);
  ASSERT_EQ(info->status, 200) << info->body;
  const nlohmann::json i = parse_json(info->body, "info");
  EXPECT_EQ(i["eos_token"], "<eos>");
  EXPECT_EQ(i["bos_token"], "<bos>");
  EXPECT_EQ(i["pad_token"], "<pad>");
  EXPECT_EQ(i["eos_token_id"], s.tok.eos_id());
  EXPECT_EQ(i["vocab_size"], s.tok.vocab_size());
  EXPECT_EQ(i["model_max_length"], s.server->context());

  // The harness's eos_token_id is /tokenize(eos_token)[0], without special tokens.
  nlohmann::json j = tokenizer_post(cli, "/tokenize", R"({"prompt": "<eos>", "add_special_tokens": false})", 200);
  EXPECT_EQ(j["tokens"], std::vector<int32_t>{s.tok.eos_id()});
  EXPECT_EQ(j["count"], 1);
  j = tokenizer_post(cli, "/tokenize", R"({"prompt": "In the beginning", "add_special_tokens": false})", 200);
  EXPECT_EQ(j["tokens"], s.tok.encode("In the beginning"));
  EXPECT_EQ(j["max_model_len"], s.server->context());
  // vLLM's default puts BOS first, as a completions text prompt runs.
  j = tokenizer_post(cli, "/tokenize", R"({"prompt": "In the beginning", "return_token_strs": true})", 200);
  EXPECT_EQ(j["tokens"], encode_prompt(s.tok, "In the beginning", true));
  ASSERT_EQ(j["token_strs"].size(), j["tokens"].size());
  EXPECT_EQ(j["token_strs"][0], "<bos>");

  const std::vector<int32_t> ids = s.tok.encode("And God said");
  j = tokenizer_post(cli, "/detokenize", nlohmann::json{{"tokens", ids}}.dump(), 200);
  EXPECT_EQ(j["prompt"], "And God said");
  j = tokenizer_post(cli, "/detokenize", R"({"tokens": []})", 200);
  EXPECT_EQ(j["prompt"], "");
}

TEST(TokenizerApi, BadBodiesGet400sNamingTheField) {
  TokenizerServed s;
  auto cli = s.client();
  const auto error = [&](const std::string& path, const std::string& body, const std::string& param,
                         const std::string& words) {
    const nlohmann::json j = tokenizer_post(cli, path, body, 400);
    ASSERT_TRUE(j.contains("error")) << j.dump();
    EXPECT_EQ(j["error"]["param"], param.empty() ? nlohmann::json() : nlohmann::json(param)) << body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(words), std::string::npos) << j.dump();
  };
  error("/tokenize", R"({})", "prompt", "must be a string");
  error("/tokenize", R"({"prompt": [1, 2]})", "prompt", "must be a string");
  error("/tokenize", R"({"prompt": "x", "add_special_tokens": "no"})", "add_special_tokens", "true or false");
  error("/tokenize", R"([1])", "", "JSON object");
  error("/tokenize", R"({"prompt": )", "", "JSON");
  error("/detokenize", R"({"tokens": "abc"})", "tokens", "list of token ids");
  error("/detokenize", R"({"tokens": [1, -2]})", "tokens", "'tokens[1]' = -2 is not a token id");
  error("/detokenize", R"({"tokens": [1, 1.5]})", "tokens", "is not a token id");
  error("/detokenize", R"({"tokens": [1, 99999]})", "tokens", "outside the tokenizer's vocabulary 0..399");
  // A body nested deeper than the parser allows is a 400, and the server lives on.
  error("/detokenize", "{\"tokens\": " + std::string(5000, '[') + std::string(5000, ']') + "}", "", "deeper");
  auto res = cli.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // GET on a POST route: 405.
  res = cli.Get("/tokenize");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

TEST(TokenizerApi, NeedTheApiKeyWhenTheServerHasOne) {
  TokenizerServed s("sekrit");
  auto cli = s.client();
  for (const auto& [path, body] : {std::pair{"/tokenize", R"({"prompt": "x"})"}, {"/detokenize", R"({"tokens": [5]})"}})
    tokenizer_post(cli, path, body, 401);
  auto res = cli.Get("/tokenizer_info");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  cli.set_bearer_token_auth("sekrit");
  tokenizer_post(cli, "/tokenize", R"({"prompt": "x"})", 200);
  res = cli.Get("/tokenizer_info");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

}  // namespace
}  // namespace zaya
