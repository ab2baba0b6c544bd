#include "zaya/train/train_config.h"

#include <gtest/gtest.h>

#include <string>

#include "zaya/core/error.h"

namespace zaya {
namespace {

std::string config_error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_train_config(text, "bad.toml", overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kMinimal = "[data]\ndir = \"runs/data\"\n";

TEST(TrainConfig, DefaultsPresetAndOverrides) {
  TrainConfig t = parse_train_config(std::string(kMinimal) + "[model]\npreset = \"small\"\nexperts = 4\n", "ok.toml",
                                     {"train.steps=42", "optim.lr=0.01", "train.out_dir=runs/x"});
  EXPECT_EQ(t.model.hidden, 512);
  EXPECT_EQ(t.model.experts, 4);
  EXPECT_EQ(t.run.steps, 42);
  EXPECT_DOUBLE_EQ(t.optim.lr, 0.01);
  EXPECT_EQ(t.run.out_dir, "runs/x");
  EXPECT_EQ(t.schedule.total_steps, 42);
  // Round trip through the TOML writer.
  TrainConfig again = parse_train_config(train_config_to_toml(t), "again.toml");
  EXPECT_EQ(again.model.experts, 4);
  EXPECT_EQ(again.run.steps, 42);
  EXPECT_EQ(train_config_to_toml(again), train_config_to_toml(t));
  EXPECT_EQ(again.run.recompute, Recompute::kNone);
  // train.recompute: read, and written back.
  TrainConfig full = parse_train_config(train_config_to_toml(t), "again.toml", {"train.recompute=\"full\""});
  EXPECT_EQ(full.run.recompute, Recompute::kFull);
  EXPECT_EQ(parse_train_config(train_config_to_toml(full), "full.toml").run.recompute, Recompute::kFull);
  // train.loss_chunk: 0 by default, read, written back, never negative.
  EXPECT_EQ(t.run.loss_chunk, 0);
  TrainConfig chunked = parse_train_config(train_config_to_toml(t), "again.toml", {"train.loss_chunk=1024"});
  EXPECT_EQ(parse_train_config(train_config_to_toml(chunked), "chunked.toml").run.loss_chunk, 1024);
  try {
    parse_train_config(train_config_to_toml(t), "again.toml", {"train.loss_chunk=-1"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss_chunk"), std::string::npos) << e.what();
  }
  TrainConfig gather = parse_train_config(train_config_to_toml(t), "again.toml",
                                          {"train.precision=bf16", "parallel.zero_gather_dtype=bf16"});
  EXPECT_EQ(t.parallel.zero_gather_dtype, ValueDtype::kF32);  // the default
  EXPECT_EQ(parse_train_config(train_config_to_toml(gather), "gather.toml").parallel.zero_gather_dtype,
            ValueDtype::kBF16);
}

// data.document_masking: off by default, read, written back, and only true or false.
TEST(TrainConfig, DocumentMasking) {
  EXPECT_FALSE(parse_train_config(kMinimal, "ok.toml").data.document_masking);
  TrainConfig t = parse_train_config(std::string(kMinimal) + "document_masking = true\n", "ok.toml");
  EXPECT_TRUE(t.data.document_masking);
  EXPECT_TRUE(parse_train_config(train_config_to_toml(t), "again.toml").data.document_masking);
  EXPECT_TRUE(parse_train_config(kMinimal, "ok.toml", {"data.document_masking=true"}).data.document_masking);
  const std::string e = config_error_of(std::string(kMinimal) + "document_masking = \"yes\"\n");
  EXPECT_NE(e.find("bad.toml"), std::string::npos) << e;
  EXPECT_NE(e.find("data.document_masking = 'yes' is invalid; allowed: true or false"), std::string::npos) << e;
}

TEST(TrainConfig, ErrorsNameFileKeyValueAndAllowed) {
  std::string e = config_error_of(std::string(kMinimal) + "[train]\nstesp = 5\n");
  EXPECT_NE(e.find("bad.toml:4"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'train.stesp'"), std::string::npos) << e;
  EXPECT_NE(e.find("steps"), std::string::npos) << e;  // lists the allowed keys
  e = config_error_of(std::string(kMinimal) + "[train]\nmicro_batch = 0\n");
  EXPECT_NE(e.find("train.micro_batch = 0 is invalid; allowed: an integer in 1.."), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[model]\npreset = \"huge\"\n");
  EXPECT_NE(e.find("model.preset = 'huge' is invalid; allowed: one of: tiny, small, zaya1-base"), std::string::npos)
      << e;
  e = config_error_of(std::string(kMinimal) + "[train]\nprecision = \"fp16\"\n");
  EXPECT_NE(e.find("bad.toml"), std::string::npos) << e;
  EXPECT_NE(e.find("train.precision = 'fp16' is invalid; allowed: one of: f32, bf16, auto"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[train]\nrecompute = \"selective\"\n");
  EXPECT_NE(e.find("train.recompute = 'selective' is invalid; allowed: one of: none, attention, moe, full"),
            std::string::npos)
      << e;
  // The options that are sets of names (enums parsed where the config is read) list them.
  e = config_error_of(std::string(kMinimal) + "[schedule]\nkind = \"linear\"\n");
  EXPECT_NE(e.find("bad.toml:4: schedule.kind = 'linear' is invalid; allowed: one of: cosine, wsd, constant"),
            std::string::npos)
      << e;
  e = config_error_of(std::string(kMinimal) + "[optim]\nns_dtype = \"fp16\"\n");
  EXPECT_NE(e.find("optim.ns_dtype = 'fp16' is invalid; allowed: one of: auto, bf16, f32"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[train]\nsave_dtype = \"f16\"\n");
  EXPECT_NE(e.find("train.save_dtype = 'f16' is invalid; allowed: one of: f32, bf16"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[parallel]\nzero_gather_dtype = \"fp8\"\n");
  EXPECT_NE(e.find("parallel.zero_gather_dtype = 'fp8' is invalid; allowed: one of: f32, bf16"), std::string::npos)
      << e;
  // A bf16 gather fills the bf16 weight copy: it needs bf16 GEMMs.
  e = config_error_of(std::string(kMinimal) + "[parallel]\nzero_gather_dtype = \"bf16\"\n");
  EXPECT_NE(e.find("bad.toml: parallel.zero_gather_dtype = \"bf16\" needs bf16 GEMMs"), std::string::npos) << e;
  EXPECT_NE(e.find("train.precision = \"bf16\" or \"auto\""), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[optim]\nlr = \"fast\"\n");
  EXPECT_NE(e.find("optim.lr"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[model]\nq_heads = 3\n");
  EXPECT_NE(e.find("num_query_groups"), std::string::npos) << e;
  e = config_error_of("[data\n");
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos) << e;
  e = config_error_of("[train]\nsteps = 3\n");
  EXPECT_NE(e.find("data.dir is missing"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[trian]\n");
  EXPECT_NE(e.find("unknown section 'trian'"), std::string::npos) << e;
  e = config_error_of(kMinimal, {"steps=3"});
  EXPECT_NE(e.find("expected section.key=value"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[schedule]\nkind = \"linear\"\n");
  EXPECT_NE(e.find("cosine, wsd, constant"), std::string::npos) << e;
}

// The message of the UsageError that a bad --set raises ("" if it raised none, or another error).
std::string usage_error_of(const std::string& text, const std::vector<std::string>& overrides) {
  try {
    parse_train_config(text, "ok.toml", overrides);
  } catch (const UsageError& e) {
    return e.what();
  } catch (const Error& e) {
    return std::string("not a usage error: ") + e.what();
  }
  return "";
}

TEST(TrainConfig, SetMistakesBlameTheCommandLine) {
  // A misspelt key: the flag is named (not the file), with the key it most likely means.
  std::string e = usage_error_of(kMinimal, {"train.stesp=3"});
  EXPECT_EQ(e.rfind("--set train.stesp=3: unknown key 'train.stesp' (did you mean 'train.steps'?); allowed keys in "
                    "[train]: ",
                    0),
            0u)
      << e;
  EXPECT_EQ(e.find("ok.toml"), std::string::npos) << e;
  e = usage_error_of(kMinimal, {"optim.lr=0.01", "model.hiden_size=64"});
  EXPECT_NE(e.find("--set model.hiden_size=64: unknown key 'model.hiden_size' (did you mean 'model.hidden_size'?)"),
            std::string::npos)
      << e;
  // A misspelt section.
  e = usage_error_of(kMinimal, {"trian.steps=3"});
  EXPECT_EQ(e,
            "--set trian.steps=3: unknown section 'trian' (did you mean 'train'?); allowed: model, data, train, "
            "optim, schedule, moe, parallel, checkpoint, ft, lora, phase, rl")
      << e;
  // A bad value, and one of the wrong type.
  e = usage_error_of(kMinimal, {"train.micro_batch=0"});
  EXPECT_EQ(e.rfind("--set train.micro_batch=0: train.micro_batch = 0 is invalid; allowed: an integer in 1..", 0), 0u)
      << e;
  e = usage_error_of(kMinimal, {"optim.lr=fast"});
  EXPECT_EQ(e.rfind("--set optim.lr=fast: optim.lr = ", 0), 0u) << e;
  // Not an assignment.
  EXPECT_NE(usage_error_of(kMinimal, {"steps=3"}).find("--set steps=3 is invalid; expected section.key=value"),
            std::string::npos);
  // A key that nothing is close to: the allowed keys, no guess.
  e = usage_error_of(kMinimal, {"train.learning_rate=1"});
  EXPECT_NE(e.find("unknown key 'train.learning_rate'; allowed keys in [train]: seed,"), std::string::npos) << e;
  // The same typo in the file is the file's: a plain Error naming file:line, with the guess too.
  e = config_error_of(std::string(kMinimal) + "[train]\nstesp = 5\n");
  EXPECT_NE(e.find("bad.toml:4: unknown key 'train.stesp' (did you mean 'train.steps'?)"), std::string::npos) << e;
  EXPECT_EQ(usage_error_of(std::string(kMinimal) + "[train]\nstesp = 5\n", {}).rfind("not a usage error", 0), 0u);
  e = config_error_of(std::string(kMinimal) + "[optimizer]\n");
  EXPECT_NE(e.find("bad.toml: unknown section 'optimizer' (did you mean 'optim'?)"), std::string::npos) << e;
  // A good --set value still wins over the file.
  EXPECT_EQ(parse_train_config(std::string(kMinimal) + "[train]\nsteps = 5\n", "ok.toml", {"train.steps=7"}).run.steps,
            7);
}

}  // namespace
}  // namespace zaya

namespace zaya {
namespace {

TEST(TrainConfig, LoraSectionParsesRoundTripsAndNamesBadValues) {
  TrainConfig none = parse_train_config(kMinimal, "ok.toml");
  EXPECT_FALSE(none.lora.enabled);
  EXPECT_EQ(train_config_to_toml(none).find("[lora]"), std::string::npos);
  TrainConfig t = parse_train_config(std::string(kMinimal) +
                                         "[lora]\nrank = 4\nalpha = 8\ndropout = 0.1\n"
                                         "targets = [\"q_proj\", \"o_proj\"]\ntrain_biases = true\n",
                                     "ok.toml");
  EXPECT_TRUE(t.lora.enabled);
  EXPECT_EQ(t.lora.rank, 4);
  EXPECT_DOUBLE_EQ(t.lora.scale(), 2.0);
  EXPECT_DOUBLE_EQ(t.lora.dropout, 0.1);
  EXPECT_EQ(t.lora.targets, (std::vector<LoraTarget>{LoraTarget::kQ, LoraTarget::kO}));
  EXPECT_TRUE(t.lora.train_biases);
  TrainConfig again = parse_train_config(train_config_to_toml(t), "again.toml");
  EXPECT_EQ(train_config_to_toml(again), train_config_to_toml(t));
  EXPECT_EQ(again.lora.targets, t.lora.targets);
  // Defaults: every attention projection, biases frozen.
  TrainConfig d = parse_train_config(std::string(kMinimal) + "[lora]\n", "ok.toml");
  EXPECT_TRUE(d.lora.enabled);
  EXPECT_EQ(d.lora.targets.size(), 5u);
  EXPECT_FALSE(d.lora.train_biases);
  std::string e = config_error_of(std::string(kMinimal) + "[lora]\ntargets = [\"q_proj\", \"gate_proj\"]\n");
  EXPECT_NE(e.find("bad.toml:4: lora.targets = ["), std::string::npos) << e;
  EXPECT_NE(e.find("gate_proj"), std::string::npos) << e;
  EXPECT_NE(e.find("is invalid; allowed: a non-empty list of distinct names out of q_proj, k_proj, v_proj_current, "
                   "v_proj_delayed, o_proj"),
            std::string::npos)
      << e;
  // Router and expert targets by their native module paths; expert targets refuse dropout, by name.
  TrainConfig moe = parse_train_config(std::string(kMinimal) +
                                           "[lora]\ntargets = [\"mlp.gate.router_mlp.fc1\", "
                                           "\"mlp.experts.down_proj\", \"o_proj\"]\n",
                                       "ok.toml");
  EXPECT_EQ(moe.lora.targets,
            (std::vector<LoraTarget>{LoraTarget::kRouterFc1, LoraTarget::kExpertDown, LoraTarget::kO}));
  EXPECT_EQ(parse_train_config(train_config_to_toml(moe), "again.toml").lora.targets, moe.lora.targets);
  e = config_error_of(std::string(kMinimal) + "[lora]\ndropout = 0.5\ntargets = [\"mlp.experts.gate_up_proj\"]\n");
  EXPECT_NE(e.find("bad.toml:4: lora.dropout = 0.5 is not allowed here: dropout must be 0 with expert targets "
                   "(mlp.experts.*)"),
            std::string::npos)
      << e;
  e = config_error_of(std::string(kMinimal) + "[lora]\ntargets = [\"gate_up_proj\"]\n");
  EXPECT_NE(e.find("mlp.gate.down_proj, mlp.gate.router_mlp.fc1, mlp.gate.router_mlp.fc2, "
                   "mlp.gate.router_mlp.out_proj, mlp.experts.gate_up_proj, mlp.experts.down_proj"),
            std::string::npos)
      << e;
  e = config_error_of(std::string(kMinimal) + "[lora]\nrank = 0\n");
  EXPECT_NE(e.find("lora.rank = 0 is invalid; allowed: an integer in 1..4096"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[lora]\ndropout = 1.0\n");
  EXPECT_NE(e.find("lora.dropout = 1.0 is invalid; allowed: a number in [0, 0.99]"), std::string::npos) << e;
  e = config_error_of(std::string(kMinimal) + "[lora]\nalpah = 3\n");
  EXPECT_NE(e.find("unknown key 'lora.alpah' (did you mean 'lora.alpha'?)"), std::string::npos) << e;
}

}  // namespace
}  // namespace zaya
