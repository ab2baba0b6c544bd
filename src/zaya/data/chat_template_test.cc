// The chat template: Gemma 3's text for system, user and assistant turns, the
// alternation rules with messages named, and the plain fallback of a
// tokenizer without the turn markers (ids of the same text, a stop string).
#include "zaya/data/chat_template.h"

#include <gtest/gtest.h>

#include "zaya/data/test_util.h"

namespace zaya {
namespace {

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
            "messages[1].role \"tool\" is invalid; allowed: system (first message only), user, assistant");
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

}  // namespace
}  // namespace zaya
