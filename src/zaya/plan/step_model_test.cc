#include "zaya/plan/step_model.h"

#include <gtest/gtest.h>

#include "zaya/core/error.h"
#include "zaya/model/model.h"
#include "zaya/plan/builtin_profiles.h"

namespace zaya {
namespace {

TrainLayout gpu_layout() {
  TrainLayout L;
  L.micro_batch = 1;
  L.seq_len = 1024;
  L.dtype = "bf16";
  L.grad_bytes = L.param_bytes = 2;
  return L;
}

TEST(StepModel, OneDeviceHasNoCommunication) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  const StepPrediction r = predict_step(preset_config("small"), gpu_layout(), g);
  EXPECT_EQ(r.grad_reduce + r.param_gather + r.expert_all_to_all, 0);
  EXPECT_GT(r.gemm_fwd, 0);
  EXPECT_GT(r.gemm_bwd, r.gemm_fwd);  // two GEMMs per forward one
  EXPECT_GT(r.optimizer_gemm, 0);
  EXPECT_NEAR(r.step, r.compute + r.optimizer_gemm + r.optimizer_stream, 1e-12);
}

TEST(StepModel, AccountingIsConsistent) {
  const GemmModel g(*find_builtin_profile("h100"));
  const ZayaConfig c = preset_config("small");
  TrainLayout L = gpu_layout();
  const StepPrediction one = predict_step(c, L, g);
  L.grad_accum = 4;
  const StepPrediction four = predict_step(c, L, g);
  EXPECT_NEAR(four.compute, 4 * one.compute, 1e-9 * four.compute);
  EXPECT_NEAR(four.tokens_per_second, double(4 * 1024) / four.step, 1e-6);
  const double routed = double(c.num_blocks) * 1024 * double(c.top_k);
  EXPECT_NEAR(four.model_flops_per_rank, 4 * 3 * model_forward_flops(c, 1, 1024, routed), 1);
  EXPECT_NEAR(four.mfu, four.model_flops_per_rank / four.step / (989400e9), 1e-12);
}

// zaya.cpp's CPU trainer under train.precision = "bf16" (ops/bf16_linear.h):
// linear layers in bf16, each rounding its activation operand first; the
// attention core and the grouped convolution in float32; float32
// activations; a bf16 copy of every weight refreshed once per update.
TEST(StepModel, CpuTrainerRunsEveryGemmInBf16AndRoundsItsOperands) {
  const GemmModel g(*find_builtin_profile("h100"));
  const HardwareProfile& p = g.profile();
  const ZayaConfig c = preset_config("small");
  TrainLayout L;
  L.cpu_trainer = true;
  L.micro_batch = 8;
  L.seq_len = 256;
  L.dtype = "f32";
  const StepPrediction f32 = predict_step(c, L, g);
  L.dtype = "bf16";
  const StepPrediction bf16 = predict_step(c, L, g);
  ASSERT_EQ(f32.gemms.size(), bf16.gemms.size());
  double rounded = 0, calls = 0;
  int conv = 0, core = 0;
  const double kv_per_q = double(c.kv_heads) / double(c.q_heads), per_call = double(L.micro_batch * c.q_heads);
  const double taps = double(c.conv_kernel1), groups = double(c.conv_channels() / c.head_dim);
  for (size_t i = 0; i < bf16.gemms.size(); ++i) {
    const ModelGemm& m = bf16.gemms[i].gemm;
    EXPECT_LT(bf16.gemms[i].seconds, f32.gemms[i].seconds) << m.name << " " << m.phase;
    const double operand = double(m.shape.m * m.shape.k) * m.count;
    const double elements = m.phase == "bwd.dw" ? double(m.shape.k * m.shape.n) : double(m.shape.m * m.shape.k);
    if (m.name.rfind("attn.conv", 0) == 0) {  // the grouped conv regroups its operand once for all taps
      ++conv;
      rounded += 6 * elements * m.count / taps;
      calls += m.count / (double(L.micro_batch) * groups * taps);
      continue;
    }
    const bool linear = m.name.rfind("attn.", 0) != 0 || m.name == "attn.qkv_proj" || m.name == "attn.o_proj";
    if (!linear) {  // the attention core rounds Q, K and V before the scores and dO before dP
      ++core;
      if (m.name == "attn.scores") {
        rounded += 6 * operand * (1 + 2 * kv_per_q);
        calls += 3 * m.count / per_call;
      } else if (m.name == "attn.dprobs") {
        rounded += 6 * operand;
        calls += m.count / per_call;
      }
      continue;
    }
    if (m.name == "lm_head" && m.phase == "bwd.dx") continue;  // the cross-entropy writes dy in bf16
    rounded += 6 * elements * m.count;                         // read 4 bytes, write 2
    calls += m.count;
  }
  EXPECT_EQ(conv, 3);  // forward, data and weight gradients
  EXPECT_EQ(core, 7);  // scores, values, scores again, dP, dQ, dK, dV
  // The same bandwidth-bound ops at 4 bytes per value, plus the rounding.
  const double rounding = rounded / (p.stream_gbps.value * 1e9) + calls * p.op_overhead_us.value * 1e-6;
  EXPECT_NEAR(bf16.stream - f32.stream, rounding, 1e-9 * rounding);
  // The bf16 weight copy of 58.9M floats, on one rank written by the update's own pass (2 bytes each);
  // on several ranks a pass of its own after the all-gather (read 4 bytes, write 2).
  const double fused = 2.0 * 58920336 / (p.stream_gbps.value * 1e9);
  EXPECT_NEAR(bf16.optimizer_stream - f32.optimizer_stream, fused, 1e-9 * fused);
  L.world = 2;
  L.dtype = "f32";
  const double f32_two = predict_step(c, L, g).optimizer_stream;
  L.dtype = "bf16";
  const double separate = 6.0 * 58920336 / (p.stream_gbps.value * 1e9) + p.op_overhead_us.value * 1e-6;
  EXPECT_NEAR(predict_step(c, L, g).optimizer_stream - f32_two, separate, 1e-9 * separate);
  L.world = 1;
  // A GPU stack keeps its activations in bf16: half the bytes, no rounding pass.
  L.cpu_trainer = false;
  L.dtype = "f32";
  const StepPrediction gpu_f32 = predict_step(c, L, g);
  L.dtype = "bf16";
  EXPECT_LT(predict_step(c, L, g).stream, gpu_f32.stream);
}

TEST(StepModel, ZeroOneShardsTheOptimizerAndAddsCollectives) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  const ZayaConfig c = preset_config("zaya1-base");
  TrainLayout L = gpu_layout();
  const StepPrediction one = predict_step(c, L, g);
  L.world = 8;
  const StepPrediction eight = predict_step(c, L, g);
  EXPECT_LT(eight.optimizer_gemm,
            one.optimizer_gemm / 4);  // whole tensors per rank: about 1/8, never all
  EXPECT_GT(eight.grad_reduce, 0);
  EXPECT_GT(eight.param_gather, 0);
  EXPECT_LE(eight.grad_reduce_exposed, eight.grad_reduce);  // overlapped on GPUs
  EXPECT_EQ(eight.expert_all_to_all, 0);
  L.ep = 8;
  const StepPrediction ep = predict_step(c, L, g);
  EXPECT_GT(ep.expert_all_to_all, 0);
}

// Context parallelism: the same global batch (2 ranks, one sequence, cp 2)
// takes half of every GEMM per rank, adds the K/V gathers and halves the
// model FLOPs per rank; tokens per step count the sequence once.
TEST(StepModel, ContextParallelSplitsTheComputeAndAddsKvCollectives) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  const ZayaConfig c = preset_config("zaya1-base");
  TrainLayout L = gpu_layout();
  L.seq_len = 32768;
  const StepPrediction one = predict_step(c, L, g);
  L.world = 2;
  L.cp = 2;
  const StepPrediction cp = predict_step(c, L, g);
  EXPECT_EQ(L.tokens_per_step(), 32768);
  EXPECT_EQ(L.dp(), 1);
  EXPECT_EQ(L.expert_replicas(), 2);
  EXPECT_NEAR(cp.gemm_fwd, one.gemm_fwd / 2, 1e-9 * one.gemm_fwd);
  EXPECT_NEAR(cp.compute, one.compute / 2, 1e-9 * one.compute);
  EXPECT_NEAR(cp.model_flops_per_rank, one.model_flops_per_rank / 2, 1);
  EXPECT_GT(cp.context_parallel, 0);
  EXPECT_NEAR(cp.step,
              cp.compute + cp.context_parallel + cp.optimizer_gemm + cp.optimizer_stream + cp.grad_reduce_exposed +
                  cp.param_gather,
              1e-9 * cp.step);
  EXPECT_EQ(one.context_parallel, 0);
}

TEST(StepModel, RejectsImpossibleLayouts) {
  const GemmModel g(*find_builtin_profile("h100"));
  TrainLayout L = gpu_layout();
  L.world = 6;
  L.ep = 4;
  EXPECT_THROW(predict_step(preset_config("small"), L, g), Error);
  L.world = 4;
  L.ep = 1;
  L.cp = 3;  // not a divisor of the world
  EXPECT_THROW(predict_step(preset_config("small"), L, g), Error);
  L.cp = 4;
  L.seq_len = 1004;  // not a multiple of 2 x cp
  try {
    predict_step(preset_config("small"), L, g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--seq-len = 1004 does not fit --cp = 4"), std::string::npos) << e.what();
  }
  L.cp = 1;
  L.seq_len = 1024;
  L.world = 4096;
  try {
    predict_step(preset_config("small"), L, g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1..1024"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zaya
