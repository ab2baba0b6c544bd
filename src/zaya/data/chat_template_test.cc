// The chat formats: Gemma 3's and ZAYA1-8B's text against the Jinja
// templates (tests/data/chat_templates: the corpus, and what transformers'
// renderer makes of it, checked by tests/interop/chat_templates.sh), the
// conversation rules with messages named, the plain fallback of a tokenizer
// without the turn markers (ids of the same text, a stop string), which
// tokens an assistant turn generates, and how a model's format is chosen.
#include "zaya/data/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "zaya/data/chat_json.h"
#include "zaya/data/test_util.h"
#include "zaya/io/gguf_writer.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

std::string chat_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every case of the corpus rendered as transformers renders it with the templates.
TEST(ChatTemplate, MatchesTheJinjaTemplatesOnTheCorpus) {
  const std::string dir = std::string(ZAYA_TEST_DATA_DIR) + "/chat_templates/";
  using ojson = nlohmann::ordered_json;
  const ojson corpus = parse_json<ojson>(chat_file_text(dir + "corpus.json"), "corpus.json");
  std::map<std::string, std::string> want;
  for_each_json_line(chat_file_text(dir + "expected.jsonl"), "expected.jsonl",
                     [&](nlohmann::json&& j, const std::string&) {
                       want[j["name"].get<std::string>()] = j["text"].get<std::string>();
                       return true;
                     });
  ASSERT_EQ(want.size(), corpus.size());
  for (const ojson& c : corpus) {
    ChatOptions o;
    o.format = enum_parse<ChatFormat>(kChatFormatNames, c["format"].get<std::string>(), "format");
    if (c.contains("enable_thinking")) o.enable_thinking = c["enable_thinking"].get<bool>();
    if (c.contains("tools")) o.tools = read_chat_tools(c["tools"], 100);
    std::vector<ChatMessage> messages;
    for (const ojson& m : c["messages"]) {
      ChatMessage x(m["role"].get<std::string>(), m["content"].get<std::string>());
      if (m.contains("reasoning_content")) x.reasoning = m["reasoning_content"].get<std::string>();
      if (m.contains("tool_calls")) x.tool_calls = read_tool_calls(m["tool_calls"], "tool_calls");
      messages.push_back(x);
    }
    const std::string name = c["name"].get<std::string>();
    EXPECT_EQ(render_chat(messages, c["add_generation_prompt"].get<bool>(), o), want[name]) << name;
  }
}

TEST(ChatTemplate, RendersGemma3Turns) {
  EXPECT_EQ(render_chat({{"user", "Hi there "}}, true),
            "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render_chat({{"system", "Be brief."}, {"user", "\nHi"}, {"assistant", "Hello."}, {"user", "Why?"}}, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render_chat({{"user", "a"}, {"assistant", "b"}}, false),
            "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n");
}

TEST(ChatTemplate, RefusesConversationsItCannotRender) {
  auto message = [](const std::vector<ChatMessage>& m) {
    try {
      check_chat(m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({}), "messages is empty; a conversation needs at least one message");
  EXPECT_EQ(message({{"system", "s"}}), "messages has no user message (a system message alone has no turn to open)");
  EXPECT_EQ(message({{"user", "a"}, {"tool", "b"}}),
            "messages[1].role \"tool\" is invalid; allowed: system (first message only), user, assistant (the chat "
            "format gemma3 has no tool results; the zaya format has)");
  EXPECT_EQ(message({{"user", "a"}, {"system", "b"}}),
            "messages[1].role \"system\" is allowed only for the first message");
  EXPECT_EQ(message({{"assistant", "a"}}),
            "messages[0].role is \"assistant\" where \"user\" is expected: roles must alternate user/assistant/... "
            "(after an optional first system message)");
  EXPECT_NE(message({{"user", "a"}, {"user", "b"}}).find("messages[1].role is \"user\" where \"assistant\""),
            std::string::npos);
}

// The test tokenizer has no <start_of_turn> piece: the markers are spelled as
// text, a model turn ends at the stop string, and the model's tokens are marked.
TEST(ChatTemplate, PlainFallbackWithoutTurnMarkers) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  EXPECT_EQ(special_piece_id(tok, kStartOfTurn), -1);
  const std::vector<ChatMessage> chat = {{"user", "In the beginning"}, {"assistant", "God created"}};
  const ChatEncoding e = encode_chat(tok, chat, true);
  EXPECT_FALSE(e.special_markers);
  ASSERT_EQ(e.ids.size(), e.by_model.size());
  EXPECT_EQ(e.ids[0], tok.bos_id());
  EXPECT_EQ(tok.decode(e.ids), render_chat(chat, true));
  std::vector<int32_t> model_ids;
  for (size_t i = 0; i < e.ids.size(); ++i)
    if (e.by_model[i]) model_ids.push_back(e.ids[i]);
  EXPECT_EQ(tok.decode(model_ids), "God created<end_of_turn>");
  const ChatStop stop = chat_stop(tok);
  EXPECT_TRUE(stop.ids.empty());
  EXPECT_EQ(stop.strings, std::vector<std::string>{"<end_of_turn>"});
  // Ordinary pieces are found; a missing one is -1, not unk.
  EXPECT_EQ(special_piece_id(tok, tok.id_to_piece(tok.eos_id())), tok.eos_id());
}

TEST(ChatTemplate, ZayaConversationRules) {
  auto message = [](const std::vector<ChatMessage>& m) {
    try {
      check_chat(m, ChatFormat::kZaya);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({{"user", "a"}, {"user", "b"}, {"assistant", "c"}}), "");
  EXPECT_EQ(message({{"system", "s"}}), "messages has only a system message; a conversation needs a user message");
  EXPECT_EQ(message({{"user", "a"}, {"tool", "b"}}),
            "messages[1].role is \"tool\" but no assistant tool call comes before it");
  ChatMessage calls("assistant", "");
  calls.tool_calls.push_back({"c", "f", nlohmann::ordered_json::object()});
  EXPECT_EQ(message({{"user", "a"}, calls, {"tool", "b"}, {"tool", "c"}, {"user", "d"}}), "");
  EXPECT_EQ(message({{"user", "a"}, calls, {"tool", "b"}, {"user", "d"}, {"tool", "e"}}),
            "messages[4].role is \"tool\" but no assistant tool call comes before it");
  ChatMessage thinking_user("user", "x");
  thinking_user.reasoning = "r";
  EXPECT_EQ(message({thinking_user}), "messages[0]: only an assistant message has tool_calls or reasoning_content");
  EXPECT_THROW(check_chat({{"user", "a"}, calls}), Error);  // gemma3 has no tool calls
}

// The plain fallback in the zaya format: markers as text, the turn end as a stop
// string, and an assistant turn's generated part (after <think>\n, to <|im_end|>) marked.
TEST(ChatTemplate, ZayaPlainFallbackAndModelTokens) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  ChatOptions o;
  o.format = ChatFormat::kZaya;
  ChatMessage answer("assistant", "God created");
  answer.reasoning = "the heaven";
  const std::vector<ChatMessage> chat = {{"user", "In the beginning"}, answer};
  const ChatEncoding e = encode_chat(tok, chat, false, o);
  EXPECT_FALSE(e.special_markers);
  EXPECT_EQ(tok.decode(e.ids), render_chat(chat, false, o));
  std::vector<int32_t> model_ids;
  for (size_t i = 0; i < e.ids.size(); ++i)
    if (e.by_model[i]) model_ids.push_back(e.ids[i]);
  EXPECT_EQ(tok.decode(model_ids), "the heaven\n</think>\n\nGod created<|im_end|>");
  const ChatStop stop = chat_stop(tok, ChatFormat::kZaya);
  EXPECT_TRUE(stop.ids.empty());
  EXPECT_EQ(stop.strings, std::vector<std::string>{"<|im_end|>"});
  // A forced call: the think block closed, the call opened.
  ChatTool ping;
  ping.name = "ping";
  ping.entry = {{"type", "function"}, {"function", {{"name", "ping"}}}};
  o.tools = {ping};
  o.forced_tool = "ping";
  const std::string text = render_chat({{"user", "x"}}, true, o);
  EXPECT_EQ(text.substr(text.find("<|im_start|>user")),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<zyphra_tool_call>\n"
            "<function=ping>\n");
  EXPECT_THROW(render_chat({{"user", "x"}}, true, ChatOptions{ChatFormat::kGemma3, true, {ping}, {}}), Error);
}

TEST(ChatFormat, RecognisesTemplatesAndRefusesUnknownOnes) {
  const std::string dir = std::string(ZAYA_TEST_DATA_DIR) + "/chat_templates/";
  EXPECT_EQ(recognise_chat_template(chat_file_text(dir + "gemma3.jinja")), ChatFormat::kGemma3);
  EXPECT_EQ(recognise_chat_template(chat_file_text(dir + "zaya.jinja")), ChatFormat::kZaya);
  // Plain ChatML (Qwen's) is not ZAYA1-8B's.
  EXPECT_FALSE(recognise_chat_template("{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}"));
  const std::filesystem::path model = std::filesystem::path(::testing::TempDir()) / "chat_format_model";
  std::filesystem::create_directories(model);
  EXPECT_EQ(model_chat_format(model.string(), ""), ChatFormat::kGemma3);  // no template
  std::ofstream(model / "tokenizer_config.json")
      << nlohmann::json{{"chat_template", chat_file_text(dir + "zaya.jinja")}}.dump();
  std::string source;
  EXPECT_EQ(model_chat_format(model.string(), "", &source), ChatFormat::kZaya);
  EXPECT_NE(source.find("tokenizer_config.json: chat_template"), std::string::npos);
  EXPECT_EQ(model_chat_format(model.string(), "gemma3"), ChatFormat::kGemma3);
  std::ofstream(model / "tokenizer_config.json") << R"({"chat_template": "{{ messages[0].content }}"})";
  try {
    model_chat_format(model.string(), "");
    ADD_FAILURE() << "an unknown template was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not one zaya knows"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--chat-format (gemma3, zaya)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model_chat_format(model.string(), "llama"), Error);
  // A GGUF file's own template comes first.
  GgufWriter w;
  w.set_string("general.architecture", "zaya");
  w.set_string("tokenizer.chat_template", chat_file_text(dir + "gemma3.jinja"));
  w.write((model / "m.gguf").string());
  std::ofstream(model / "tokenizer_config.json")
      << nlohmann::json{{"chat_template", chat_file_text(dir + "zaya.jinja")}}.dump();
  EXPECT_EQ(model_chat_format((model / "m.gguf").string(), "", &source), ChatFormat::kGemma3);
  EXPECT_NE(source.find("m.gguf: tokenizer.chat_template"), std::string::npos) << source;
  std::filesystem::remove_all(model);
}

}  // namespace
}  // namespace zaya
