// The rewards of RL completions: the built-in verifiers (normalisation, the
// last \boxed{}, a regex's capture, numbers within a tolerance), the external
// program (scores in order, a timeout, a failing or malformed program named
// with the record), and a missing answer field named with the record.
#include "zaya/rl/reward.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

struct Items {
  std::vector<nlohmann::json> records;
  std::vector<std::string> prompts;
  std::vector<RewardItem> items;
  void add(nlohmann::json record, std::string completion) {
    records.push_back(std::move(record));
    prompts.push_back("p" + std::to_string(prompts.size()));
    items.push_back({nullptr, nullptr, std::move(completion), "f.jsonl:" + std::to_string(items.size() + 1)});
  }
  std::vector<RewardItem>& bound() {
    for (size_t i = 0; i < items.size(); ++i) {
      items[i].record = &records[i];
      items[i].prompt_text = &prompts[i];
    }
    return items;
  }
};

TEST(Reward, NormalizeTrimsCollapsesLowersAndDropsOneFinalPeriod) {
  EXPECT_EQ(normalize_answer("  The   Light\n day. "), "the light day");
  EXPECT_EQ(normalize_answer("a.."), "a.");
  EXPECT_EQ(normalize_answer(""), "");
}

TEST(Reward, LastBoxedBalancesBraces) {
  EXPECT_EQ(last_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}} end").value(), "\\frac{1}{2}");
  EXPECT_FALSE(last_boxed("no box").has_value());
  EXPECT_FALSE(last_boxed("\\boxed{unclosed").has_value());
}

TEST(Reward, LastNumberTakesSignsFractionsExponentsAndSeparators) {
  EXPECT_DOUBLE_EQ(last_number("2 + 3 = 5").value(), 5.0);
  EXPECT_DOUBLE_EQ(last_number("it is -1,234.5 total").value(), -1234.5);
  EXPECT_DOUBLE_EQ(last_number("x 1e3").value(), 1000.0);
  EXPECT_FALSE(last_number("none").has_value());
}

TEST(Reward, BuiltInVerifiersScoreOneOrZero) {
  RlConfig c;
  Items x;
  x.add({{"answer", "C b A"}}, " c  B a.");
  x.add({{"answer", "C B A"}}, "c b");
  EXPECT_EQ(score_completions(c, x.bound()), (std::vector<double>{1, 0}));
  c.reward = RewardKind::kBoxed;
  Items b;
  b.add({{"answer", "42"}}, "so \\boxed{41} no, \\boxed{ 42 }");
  b.add({{"answer", "42"}}, "42");
  EXPECT_EQ(score_completions(c, b.bound()), (std::vector<double>{1, 0}));
  c.reward = RewardKind::kRegex;
  c.pattern = "answer: (\\w+)";
  Items r;
  r.add({{"answer", "yes"}}, "answer: no ... answer: YES");
  r.add({{"answer", "yes"}}, "yes");
  EXPECT_EQ(score_completions(c, r.bound()), (std::vector<double>{1, 0}));
  c.reward = RewardKind::kNumeric;
  c.tolerance = 0.01;
  Items n;
  n.add({{"answer", 3.14159}}, "about 3.145");
  n.add({{"answer", "3.14"}}, "3.2");
  n.add({{"answer", 7}}, "no number");
  EXPECT_EQ(score_completions(c, n.bound()), (std::vector<double>{1, 0, 0}));
}

TEST(Reward, MissingOrBadAnswerFieldNamesTheRecord) {
  RlConfig c;
  Items x;
  x.add({{"answer", "a"}}, "a");
  x.add({{"solution", "a"}}, "a");
  testing::expect_error([&] { score_completions(c, x.bound()); }, "f.jsonl:2: the record has no \"answer\" field");
  Items y;
  y.add({{"answer", nlohmann::json::array()}}, "a");
  testing::expect_error([&] { score_completions(c, y.bound()); }, "f.jsonl:1: \"answer\" is []");
  c.reward = RewardKind::kRegex;
  c.pattern = "(";
  testing::expect_error([&] { score_completions(c, y.bound()); }, "rl.pattern = '(' is not a valid");
}

TEST(Reward, CommandScoresInOrderFromJsonLines) {
  RlConfig c;
  c.reward = RewardKind::kCommand;
  // The program sees each completion as JSON: score its length.
  c.command = "while IFS= read -r line; do echo \"$line\" | grep -o '\"completion\":\"[^\"]*\"' | wc -c; done";
  Items x;
  x.add({{"k", 1}}, "ab");
  x.add({{"k", 2}}, "abcd");
  const std::vector<double> s = score_completions(c, x.bound());
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1] - s[0], 2.0);
}

TEST(Reward, CommandFailuresAreErrorsNamingTheRecord) {
  RlConfig c;
  c.reward = RewardKind::kCommand;
  Items x;
  x.add({}, "a");
  x.add({}, "b");
  c.command = "cat >/dev/null; echo 1; echo oops";
  testing::expect_error([&] { score_completions(c, x.bound()); },
                        "output line 2 (the score of f.jsonl:2) is 'oops'; allowed: a finite number");
  c.command = "cat >/dev/null; echo 1";
  testing::expect_error([&] { score_completions(c, x.bound()); },
                        "printed 1 scores for 2 completions; the first without one: f.jsonl:2");
  c.command = "cat >/dev/null; echo broken >&2; exit 3";
  testing::expect_error([&] { score_completions(c, x.bound()); }, "exited with status 3; its stderr: broken");
  c.command = "sleep 5";
  c.timeout = 0.2;
  testing::expect_error([&] { score_completions(c, x.bound()); }, "ran past its timeout of 0.2 s");
}

}  // namespace
}  // namespace zaya
