#include "zaya/core/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zaya {
namespace {

TEST(Suggest, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("train", "train"), 0u);
  EXPECT_EQ(edit_distance("trian", "train"), 1u);  // two neighbours swapped: one edit
  EXPECT_EQ(edit_distance("stesp", "steps"), 1u);
  EXPECT_EQ(edit_distance("genrate", "generate"), 1u);  // insertion
  EXPECT_EQ(edit_distance("traain", "train"), 1u);      // deletion
  EXPECT_EQ(edit_distance("trbin", "train"), 1u);       // substitution
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // optimal string alignment, not full Damerau (2)
  EXPECT_EQ(edit_distance("steps", "stesp"), edit_distance("stesp", "steps"));
}

TEST(Suggest, ClosestName) {
  const std::vector<std::string> verbs = {"info", "data", "train", "generate", "score", "bench", "eval"};
  EXPECT_EQ(closest_name("trian", verbs), "train");
  EXPECT_EQ(closest_name("genrate", verbs), "generate");
  EXPECT_EQ(closest_name("evla", verbs), "eval");
  EXPECT_EQ(closest_name("Train", verbs), "train");
  EXPECT_EQ(closest_name("xyzzy", verbs), std::nullopt);
  EXPECT_EQ(closest_name("train", verbs), std::nullopt);  // a known name is no misspelling
  EXPECT_EQ(closest_name("tr", verbs), std::nullopt);     // too short to guess

  const std::vector<std::string> keys = {"seed", "micro_batch", "seq_len", "steps", "threads"};
  EXPECT_EQ(closest_name("stesp", keys), "steps");
  EXPECT_EQ(closest_name("micro_bacth", keys), "micro_batch");
  EXPECT_EQ(closest_name("microbatch", keys), "micro_batch");
  EXPECT_EQ(closest_name("learning_rate", keys), std::nullopt);
}

TEST(Suggest, FlagsComparedWithoutDashes) {
  const std::vector<std::string> flags = {"--help",           "--temperature", "--top-k", "--top-p",
                                          "--max-new-tokens", "--max-context", "-n"};
  EXPECT_EQ(closest_name("--tempreature", flags), "--temperature");
  EXPECT_EQ(closest_name("-temperature", flags), "--temperature");  // one dash
  EXPECT_EQ(closest_name("--max-new-token", flags), "--max-new-tokens");
  EXPECT_EQ(closest_name("--temp", flags), "--temperature");  // the only name it begins
  EXPECT_EQ(closest_name("--max", flags), std::nullopt);      // begins two names: no guess
  EXPECT_EQ(closest_name("-x", flags), std::nullopt);         // a one-letter flag is no word to correct
}

TEST(Suggest, PrefixOfTheWord) {
  const std::vector<std::string> sections = {"model", "data", "train", "optim", "schedule"};
  EXPECT_EQ(closest_name("optimizer", sections), "optim");
  EXPECT_EQ(closest_name("optimiser", sections), "optim");
}

}  // namespace
}  // namespace zaya
