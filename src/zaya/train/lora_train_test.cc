// A LoRA run ([lora], docs/training.md "LoRA"): only the adapters are
// stepped (the base weights and, by default, the balancing biases stay as
// they started, and the optimizer holds state for the adapters alone), and a
// resume from a checkpoint continues bit for bit, dropout included.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "zaya/core/test_util.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/train/checkpoint_tools.h"
#include "zaya/train/train_job.h"
#include "zaya/train/train_state.h"

namespace zaya {
namespace {

using testing::TempDir;

TrainConfig lora_job_config(const std::string& out_dir, const std::string& lora = "",
                            const std::string& precision = "f32", const std::string& dropout = "0.1") {
  return parse_train_config(
      "[model]\npreset = \"tiny\"\nnum_blocks = 2\nvocab_size = 512\n[data]\ndir = \"-\"\n"
      "[train]\nseq_len = 16\nmicro_batch = 2\nsteps = 20\n[schedule]\nwarmup_steps = 0\nkind = \"constant\"\n"
      "[optim]\nlr = 0.01\n[checkpoint]\nasync = false\n"
      "[lora]\nrank = 4\nalpha = 8\ndropout = " +
          dropout + "\n" + lora,
      "lora.toml", {"train.out_dir=" + out_dir, "train.precision=" + precision});
}

// Every target kind: the five attention projections, the router's four
// matrices and both expert parameters (no dropout: expert targets refuse it).
const char* kAllTargets =
    "targets = [\"q_proj\", \"k_proj\", \"v_proj_current\", \"v_proj_delayed\", \"o_proj\", "
    "\"mlp.gate.down_proj\", \"mlp.gate.router_mlp.fc1\", \"mlp.gate.router_mlp.fc2\", "
    "\"mlp.gate.router_mlp.out_proj\", \"mlp.experts.gate_up_proj\", \"mlp.experts.down_proj\"]\n";

TrainJobOptions options() {
  TrainJobOptions o;
  o.synthetic_data = true;
  o.quiet = true;
  o.write_outputs = false;
  o.peak_gflops = 100;
  return o;
}

std::vector<float> copy(const float* p, int64_t n) { return std::vector<float>(p, p + n); }

// Every base parameter's values (a frozen bf16 base holds its large matrices in bf16 only).
std::vector<float> base_values(const ZayaModel& model) {
  std::vector<float> out(size_t(model.params().total_floats()));
  for (const ParamEntry& e : model.params().entries()) model.read_param(e, out.data() + e.offset);
  return out;
}

TEST(LoraTraining, StepsOnlyTheAdaptersAndFreezesTheBaseAndBiases) {
  TempDir dir;
  const TrainConfig config = lora_job_config(dir.file("run"));
  TrainJob job(config, options());
  const ZayaModel& model = job.numerics().model();
  const LoraAdapters* lora = job.numerics().lora();
  ASSERT_NE(lora, nullptr);
  const std::vector<float> base = base_values(model);
  const std::vector<float> biases = copy(model.buffer_data(), model.buffers().total_floats());
  const std::vector<float> adapters = copy(lora->data(), lora->total_floats());
  // The optimizer's state covers the adapters only.
  EXPECT_EQ(job.numerics().optimizer().owned().size(), lora->table().entries().size());
  EXPECT_LE(job.numerics().optimizer().first_moment().capacity(), size_t(lora->total_floats()) + 64 * 32);
  // The frozen base has no gradient arena (a full run's is 4 bytes per parameter).
  EXPECT_EQ(job.numerics().base_gradient_bytes(), 0);
  EXPECT_EQ(job.numerics().gradients(), nullptr);
  double first = 0, last = 0;
  for (int i = 0; i < 6; ++i) {
    const StepResult r = job.train_step();
    (i == 0 ? first : last) = r.loss;
  }
  // Synthetic tokens are random (nothing to learn: tests/e2e/lora.sh checks learning on text); the adapters act.
  EXPECT_NE(last, first);
  EXPECT_EQ(base, base_values(model)) << "a base weight changed";
  EXPECT_EQ(biases, copy(model.buffer_data(), model.buffers().total_floats())) << "a balancing bias changed";
  EXPECT_NE(adapters, copy(lora->data(), lora->total_floats()));
  // lora.train_biases = true lets the controller move them again.
  const TrainConfig with_biases = lora_job_config(dir.file("biased"), "train_biases = true\n");
  TrainJob biased(with_biases, options());
  for (int i = 0; i < 3; ++i) biased.train_step();
  const ZayaModel& bm = biased.numerics().model();
  EXPECT_NE(biases, copy(bm.buffer_data(), bm.buffers().total_floats()));
}

TEST(LoraTraining, ResumeContinuesBitForBit) {
  TempDir dir;
  const TrainConfig config = lora_job_config(dir.file("run"));
  TrainJob job(config, options());
  for (int i = 0; i < 3; ++i) job.train_step();
  job.save_checkpoint(false);
  const std::string ck = config.checkpoint_dir() + "/step_00000003";
  // The checkpoint holds the adapters under PEFT's names with their moments, not the frozen base.
  const CheckpointReader reader = CheckpointReader::open(ck);
  const std::string a = peft_lora_a_name(config.model, 1, LoraTarget::kO);
  const auto& tensors = reader.meta().tensors;
  EXPECT_TRUE(tensors.count(a));
  EXPECT_TRUE(tensors.count("optim.v." + a));
  EXPECT_FALSE(tensors.count("model.embed_tokens.weight"));
  TrainJob resumed(config, options());
  resumed.resume_from(reader);
  EXPECT_EQ(resumed.step(), 3);
  for (int i = 0; i < 3; ++i) {
    const StepResult x = job.train_step(), y = resumed.train_step();
    EXPECT_EQ(x.loss, y.loss) << "step " << 4 + i;
    EXPECT_EQ(x.grad_norm, y.grad_norm) << "step " << 4 + i;
  }
  const LoraAdapters &l1 = *job.numerics().lora(), &l2 = *resumed.numerics().lora();
  EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), sizeof(float) * size_t(l1.total_floats())));
  // Another [lora] than the checkpoint's is refused, naming both.
  TrainJob other(lora_job_config(dir.file("run"), "targets = [\"q_proj\"]\n"), options());
  try {
    other.resume_from(reader);
    FAIL() << "a checkpoint of other adapters was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the checkpoint's LoRA adapters (rank 4, 5 targets) differ from this "
                                         "config's [lora] (rank 4, 1 targets)"),
              std::string::npos)
        << e.what();
  }
}

// train.precision = "bf16": the frozen base lives in bf16 only (no float32
// copy of its large matrices, no base gradients), stays as it started, and a
// resume from a checkpoint (which does not hold it) continues bit for bit.
TEST(LoraTraining, Bf16BaseIsHeldInBf16OnlyAndResumesBitForBit) {
  TempDir dir;
  const TrainConfig config = lora_job_config(dir.file("run"), "", "bf16");
  TrainJob job(config, options());
  const ZayaModel& model = job.numerics().model();
  ASSERT_EQ(model.storage(), ParamStorage::kFrozenBf16);
  int64_t small = 0;
  for (const ParamEntry& e : model.params().entries())
    if (!bf16_only_role(e.role)) small += int64_t(sizeof(float)) * e.numel;
  const int64_t all = int64_t(sizeof(float)) * model.params().total_floats();
  EXPECT_GE(model.f32_param_bytes(), small);
  EXPECT_LT(model.f32_param_bytes(), all / 2) << "the float32 copy of the large matrices is back";
  EXPECT_EQ(model.bf16_param_bytes(), all / 2);
  EXPECT_EQ(job.numerics().base_gradient_bytes(), 0);
  const std::vector<float> base = base_values(model);
  for (int i = 0; i < 3; ++i) job.train_step();
  EXPECT_EQ(base, base_values(model)) << "a base weight changed";
  job.save_checkpoint(false);
  TrainJob resumed(config, options());
  resumed.resume_from(CheckpointReader::open(config.checkpoint_dir() + "/step_00000003"));
  for (int i = 0; i < 3; ++i) {
    const StepResult x = job.train_step(), y = resumed.train_step();
    EXPECT_EQ(x.loss, y.loss) << "step " << 4 + i;
    EXPECT_EQ(x.grad_norm, y.grad_norm) << "step " << 4 + i;
  }
}

// A LoRA run with expert and router targets (f32, and a frozen bf16 base):
// every adapter moves, the base does not, the checkpoint holds the stacked
// expert adapters with their moments, and a resume continues bit for bit.
TEST(LoraTraining, ExpertAndRouterTargetsTrainAndResumeBitForBit) {
  for (const char* precision : {"f32", "bf16"}) {
    SCOPED_TRACE(precision);
    TempDir dir;
    const TrainConfig config = lora_job_config(dir.file("run"), kAllTargets, precision, "0");
    TrainJob job(config, options());
    const LoraAdapters* lora = job.numerics().lora();
    ASSERT_NE(lora, nullptr);
    ASSERT_EQ(lora->config().targets.size(), size_t(kLoraTargetCount));
    const ZayaModel& model = job.numerics().model();
    const std::vector<float> base = base_values(model);
    const std::vector<float> before = copy(lora->data(), lora->total_floats());
    for (int i = 0; i < 3; ++i) job.train_step();
    EXPECT_EQ(base, base_values(model)) << "a base weight changed";
    // Every adapter tensor was stepped (the experts' A starts at zero, their B random, as PEFT's).
    for (const ParamEntry& e : lora->table().entries()) {
      bool moved = false;
      for (int64_t i = 0; i < e.numel && !moved; ++i)
        moved = lora->data()[e.offset + i] != before[size_t(e.offset + i)];
      EXPECT_TRUE(moved) << e.name;
    }
    job.save_checkpoint(false);
    const std::string ck = config.checkpoint_dir() + "/step_00000003";
    const CheckpointReader reader = CheckpointReader::open(ck);
    const auto& tensors = reader.meta().tensors;
    const std::string a = lora_expert_a_name(config.model, 1, LoraTarget::kExpertGateUp);
    EXPECT_EQ(a, "lora.model.layers.1.mlp.experts.gate_up_proj.A");
    EXPECT_TRUE(tensors.count(a));
    EXPECT_TRUE(tensors.count("optim.m." + lora_expert_b_name(config.model, 0, LoraTarget::kExpertDown)));
    EXPECT_TRUE(tensors.count(peft_lora_b_name(config.model, 1, LoraTarget::kRouterOut)));
    TrainJob resumed(config, options());
    resumed.resume_from(reader);
    // Reshaped offline for dp 2 x ep 2 (the adapters stay whole: rank 0's file), then resumed here.
    const std::string reshaped_dir = reshape_checkpoint(ck, dir.file("reshaped"), 2, 2);
    TrainJob reshaped(config, options());
    reshaped.resume_from(CheckpointReader::open(reshaped_dir));
    for (int i = 0; i < 3; ++i) {
      const StepResult x = job.train_step(), y = resumed.train_step(), z = reshaped.train_step();
      EXPECT_EQ(x.loss, y.loss) << "step " << 4 + i;
      EXPECT_EQ(x.grad_norm, y.grad_norm) << "step " << 4 + i;
      EXPECT_EQ(x.loss, z.loss) << "reshaped, step " << 4 + i;
    }
    const LoraAdapters &l1 = *job.numerics().lora(), &l2 = *resumed.numerics().lora();
    EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), sizeof(float) * size_t(l1.total_floats())));
    EXPECT_EQ(0, std::memcmp(l1.data(), reshaped.numerics().lora()->data(), sizeof(float) * size_t(l1.total_floats())));
  }
}

}  // namespace
}  // namespace zaya
