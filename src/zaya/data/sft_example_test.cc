// Fine-tuning examples: the loss mask of a rendered conversation selects
// exactly the assistant's tokens (counted here by hand, from the tokenizer's
// encoding of each assistant text and its <end_of_turn>), the last-assistant
// and all choices, plain-text and chat prompt/completion pairs, and the
// messages that name what is wrong with an example.
#include "zaya/data/sft_example.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "zaya/data/test_util.h"

namespace zaya {
namespace {

nlohmann::json conversation() {
  return nlohmann::json::parse(R"({"id": 7, "system": "Be brief.", "messages": [
    {"role": "user", "content": "In the beginning"}, {"role": "assistant", "content": "God created"},
    {"role": "user", "content": "And then?"}, {"role": "assistant", "content": " the heaven and the earth. "}]})");
}

size_t count_selected(const SftDocument& d) { return size_t(std::count(d.mask.begin(), d.mask.end(), uint8_t{1})); }

// The ids of the selected tokens, in order.
std::vector<int32_t> selected_ids(const SftDocument& d) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < d.tokens.size(); ++i)
    if (d.mask[i]) out.push_back(d.tokens[i]);
  return out;
}

TEST(SftExample, MaskCountsExactlyTheAssistantTokens) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const SftExample e = parse_sft_example(conversation(), PairFormat::kText);
  ASSERT_EQ(e.messages.size(), 5u);
  EXPECT_EQ(e.messages[0].role, "system");
  const SftDocument d = encode_sft_example(tok, e, LossOn::kAssistant);
  ASSERT_EQ(d.tokens.size(), d.mask.size());
  EXPECT_EQ(d.tokens.front(), tok.bos_id());
  EXPECT_EQ(d.tokens.back(), tok.eos_id());
  // The document is the chat template's rendering, then eos.
  const ChatEncoding chat = encode_chat(tok, e.messages, false);
  EXPECT_EQ(std::vector<int32_t>(d.tokens.begin(), d.tokens.end() - 1), chat.ids);
  // By hand: each assistant text (trimmed, as the template does) and the
  // <end_of_turn> after it, encoded on their own (the test tokenizer has no
  // marker pieces: the plain fallback spells them as text).
  const size_t first = tok.encode("God created").size(), second = tok.encode("the heaven and the earth.").size();
  const size_t end = tok.encode(kEndOfTurn).size();
  EXPECT_EQ(count_selected(d), first + end + second + end);
  EXPECT_EQ(tok.decode(selected_ids(d)), "God created<end_of_turn>the heaven and the earth.<end_of_turn>");
  // Neither bos, the user turns, "model\n" nor the newline after a turn counts.
  EXPECT_EQ(d.mask.front(), 0);
  EXPECT_EQ(d.mask.back(), 0);

  const SftDocument last = encode_sft_example(tok, e, LossOn::kLastAssistant);
  EXPECT_EQ(last.tokens, d.tokens);
  EXPECT_EQ(count_selected(last), second + end);
  EXPECT_EQ(tok.decode(selected_ids(last)), "the heaven and the earth.<end_of_turn>");

  const SftDocument all = encode_sft_example(tok, e, LossOn::kAll);
  EXPECT_EQ(all.tokens, d.tokens);
  EXPECT_EQ(count_selected(all), d.tokens.size());
}

TEST(SftExample, PromptCompletionPairs) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const auto j = nlohmann::json::parse(R"({"prompt": "In the beginning", "completion": " God created"})");
  const SftExample text = parse_sft_example(j, PairFormat::kText);
  ASSERT_TRUE(text.text_pair);
  const SftDocument d = encode_sft_example(tok, text, LossOn::kAssistant);
  const std::vector<int32_t> prompt = tok.encode("In the beginning"), completion = tok.encode(" God created");
  std::vector<int32_t> want = {tok.bos_id()};
  want.insert(want.end(), prompt.begin(), prompt.end());
  want.insert(want.end(), completion.begin(), completion.end());
  want.push_back(tok.eos_id());
  EXPECT_EQ(d.tokens, want);
  // The completion and the eos that ends it.
  EXPECT_EQ(count_selected(d), completion.size() + 1);
  for (size_t i = 0; i < d.tokens.size(); ++i) EXPECT_EQ(d.mask[i], i >= 1 + prompt.size() ? 1 : 0) << i;

  const SftExample chat = parse_sft_example(j, PairFormat::kChat);
  ASSERT_FALSE(chat.text_pair);
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[1].role, "assistant");
  EXPECT_EQ(tok.decode(selected_ids(encode_sft_example(tok, chat, LossOn::kAssistant))), "God created<end_of_turn>");
}

// The zaya format: reasoning, a tool call and its result; the loss counts what
// each assistant turn generates (after "<think>\n", to <|im_end|>), the same text
// the server renders (chat_template.h).
TEST(SftExample, ZayaFormatWithReasoningAndToolCalls) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const nlohmann::json j = nlohmann::json::parse(R"({"tools": [{"type": "function", "function": {"name": "verse",
      "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}],
    "messages": [{"role": "user", "content": "In the beginning"},
      {"role": "assistant", "content": null, "reasoning_content": "look it up",
       "tool_calls": [{"id": "c", "type": "function", "function": {"name": "verse", "arguments": "{\"n\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c", "content": "God created"},
      {"role": "assistant", "content": "God created"}]})");
  const SftExample e = parse_sft_example(j, PairFormat::kText, ChatFormat::kZaya);
  ASSERT_EQ(e.tools.size(), 1u);
  const SftDocument d = encode_sft_example(tok, e, LossOn::kAssistant);
  EXPECT_EQ(tok.decode(selected_ids(d)),
            "look it up\n</think>\n\n<zyphra_tool_call>\n<function=verse>\n<parameter=n>\n1\n</parameter>\n"
            "</function>\n</zyphra_tool_call><|im_end|>\n</think>\n\nGod created<|im_end|>");
  EXPECT_NE(tok.decode(d.tokens).find("<zyphra_tool_response>\nGod created\n</zyphra_tool_response>"),
            std::string::npos);
  // The gemma3 format refuses what it cannot render.
  testing::expect_data_error([&] { parse_sft_example(j, PairFormat::kText); }, {"\"tools\" is set"});
}

TEST(SftExample, RefusesExamplesItCannotUse) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  auto parse = [](const char* text) { return parse_sft_example(nlohmann::json::parse(text), PairFormat::kText); };
  testing::expect_data_error([&] { parse(R"([1, 2])"); }, {"the line is a JSON array, expected an object"});
  testing::expect_data_error([&] { parse(R"({"text": "x"})"); }, {"neither \"messages\" nor \"prompt\""});
  testing::expect_data_error([&] { parse(R"({"messages": [], "prompt": "a", "completion": "b"})"); },
                             {"both \"messages\" and \"prompt\""});
  testing::expect_data_error([&] { parse(R"({"messages": {"role": "user"}})"); },
                             {"\"messages\" is a JSON object, expected an array"});
  testing::expect_data_error([&] { parse(R"({"messages": [{"role": "user"}]})"); }, {"messages[0] has no \"content\""});
  testing::expect_data_error([&] { parse(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})"); },
                             {"messages[0].content is a JSON array, expected a string"});
  testing::expect_data_error(
      [&] { parse(R"({"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]})"); },
      {"messages[1].role \"tool\" is invalid; allowed: system (first message only), user, assistant"});
  testing::expect_data_error(
      [&] {
        parse(R"({"system": "s", "messages": [{"role": "system", "content": "t"}, {"role": "user", "content": "a"}]})");
      },
      {"\"system\" is set and messages[0] is a system message too"});
  testing::expect_data_error([&] { parse(R"({"prompt": "a", "completion": ""})"); }, {"\"completion\" is empty"});
  testing::expect_data_error([&] { parse(R"({"prompt": "a", "completion": 3})"); },
                             {"\"completion\" is a JSON number, expected a string"});
  testing::expect_data_error([&] { parse(R"({"system": "s", "prompt": "a", "completion": "b"})"); },
                             {"\"system\" is set on a plain-text prompt/completion pair"});
  // Nothing to learn from: a conversation without an assistant turn.
  testing::expect_data_error(
      [&] {
        encode_sft_example(tok, parse(R"({"messages": [{"role": "user", "content": "a"}]})"), LossOn::kAssistant);
      },
      {"no token counts for the loss (--loss-on assistant): the conversation has no assistant message"});
  testing::expect_data_error([] { parse_loss_on("assistants"); },
                             {"loss-on 'assistants' is not known; allowed: assistant, last-assistant, all"});
  testing::expect_data_error([] { parse_pair_format("raw"); }, {"pair format 'raw' is not known; allowed: text, chat"});
}

}  // namespace
}  // namespace zaya
