// The training seq_len read for `zaya eval`'s note: from a run's config.toml
// beside final/, from a checkpoint's metadata.json, the longest phase of a
// recipe, and nothing where the files do not say.
#include "zaya/infer/trained_context.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

TEST(TrainedContext, ReadsTrainSeqLenOrTheLongestPhase) {
  EXPECT_EQ(trained_seq_len_from_toml("[train]\nmicro_batch = 8\nseq_len = 128\n"), 128);
  EXPECT_EQ(trained_seq_len_from_toml("[train]\nsteps = 10\n[[phase]]\nseq_len = 256\n[[phase]]\nseq_len = 1024\n"
                                      "[[phase]]\nseq_len = 512\n"),
            1024);
  EXPECT_EQ(trained_seq_len_from_toml("[train]\nsteps = 10\n"), std::nullopt);
  EXPECT_EQ(trained_seq_len_from_toml("[train\nseq_len = "), std::nullopt);  // not TOML
}

TEST(TrainedContext, FromARunsFinalDirectoryAndACheckpoint) {
  testing::TempDir tmp;
  fs::create_directories(tmp.file("run/final"));
  tmp.write("run/config.toml", "[train]\nseq_len = 128\n");
  tmp.write("run/final/config.json", "{}");
  for (const std::string& path : {tmp.file("run/final"), tmp.file("run/final") + "/"}) {
    const std::optional<TrainedContext> t = trained_context(path);
    ASSERT_TRUE(t.has_value()) << path;
    EXPECT_EQ(t->seq_len, 128);
    EXPECT_EQ(t->source, tmp.file("run/config.toml"));
  }
  // A model directory elsewhere (an export) says nothing, even beside a config.toml.
  fs::create_directories(tmp.file("run/export"));
  tmp.write("run/export/config.json", "{}");
  EXPECT_EQ(trained_context(tmp.file("run/export")), std::nullopt);
  // A checkpoint's recorded config.
  fs::create_directories(tmp.file("run/checkpoints/step_00000010"));
  tmp.write("run/checkpoints/step_00000010/metadata.json", R"({"step": 10, "config": "[train]\nseq_len = 96\n"})");
  const std::optional<TrainedContext> ck = trained_context(tmp.file("run/checkpoints/step_00000010"));
  ASSERT_TRUE(ck.has_value());
  EXPECT_EQ(ck->seq_len, 96);
  EXPECT_EQ(ck->source, tmp.file("run/checkpoints/step_00000010/metadata.json") + " (config)");
  EXPECT_EQ(trained_context(tmp.file("run/final/config.json")), std::nullopt);  // a file (GGUF's case)
  EXPECT_EQ(trained_context(tmp.file("missing")), std::nullopt);
}

TEST(TrainedContext, NoteOnlyPastTheTrainingLength) {
  const TrainedContext t{128, "runs/tiny/config.toml"};
  EXPECT_EQ(context_note(128, "--context", t), "");
  EXPECT_EQ(context_note(1024, "--context", std::nullopt), "");
  const std::string note = context_note(1024, "the default", t);
  EXPECT_NE(note.find("window is 1024 tokens (the default)"), std::string::npos) << note;
  EXPECT_NE(note.find("trained on sequences of 128 (runs/tiny/config.toml)"), std::string::npos) << note;
  EXPECT_NE(note.find("--context 128"), std::string::npos) << note;
}

}  // namespace
}  // namespace zaya
