// The planner's model of activation recomputation (memory_model.h,
// step_model.h): its activation bytes against the workspace zaya.cpp really
// allocates (ModelWorkspace::bytes()) within 15% for every setting, and the
// recomputed forward's time and FLOPs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "zaya/model/model.h"
#include "zaya/plan/builtin_profiles.h"
#include "zaya/plan/memory_model.h"
#include "zaya/plan/step_model.h"

namespace zaya {
namespace {

const Recompute kAll[] = {Recompute::kNone, Recompute::kAttention, Recompute::kMoe, Recompute::kFull};

TEST(RecomputeModel, ActivationBytesMatchTheWorkspaceWithin15Percent) {
  struct Case {
    const char* preset;
    int64_t batch, seq;
  };
  for (const Case& k : {Case{"tiny", 8, 128}, Case{"small", 8, 256}, Case{"small", 2, 512}}) {
    const ZayaConfig c = preset_config(k.preset);
    for (const char* dtype : {"f32", "bf16"})
      for (Recompute r : kAll)
        for (int64_t chunk : {0, 100}) {  // train.loss_chunk: all logits, or 100 rows of them at a time
          TrainLayout L;
          L.cpu_trainer = true;
          L.micro_batch = k.batch;
          L.seq_len = k.seq;
          L.dtype = dtype;
          L.recompute = r;
          L.loss_chunk = chunk;
          const MemoryPrediction m = predict_memory(c, L);
          EXPECT_EQ(m.logits, double((chunk > 0 ? chunk : k.batch * k.seq) * c.vocab_size * 4));
          const bool bf16 = std::string(dtype) == "bf16";
          const Bf16KeptInputs kept = bf16 ? bf16_kept_inputs(nullptr) : Bf16KeptInputs{};
          const double real = double(ModelWorkspace(c, k.batch, k.seq, true, nullptr, nullptr, r, kept, chunk).bytes());
          const double predicted = m.activations + m.logits;
          std::printf("%s %lld x %lld %s %-9s loss chunk %3lld: workspace %.2f MB, planned %.2f MB (%+.1f%%)\n",
                      k.preset, (long long)k.batch, (long long)k.seq, dtype, recompute_name(r).c_str(),
                      (long long)chunk, real / 1e6, predicted / 1e6, 100 * (predicted / real - 1));
          EXPECT_NEAR(predicted / real, 1.0, 0.15)
              << k.preset << " " << dtype << " " << recompute_name(r) << " loss chunk " << chunk;
        }
  }
}

TEST(RecomputeModel, PlannedMemoryShrinksAndTheWeightsFollowThePrecision) {
  const ZayaConfig c = preset_config("small");
  TrainLayout L;
  L.cpu_trainer = true;
  auto acts = [&](Recompute r) {
    L.recompute = r;
    return predict_memory(c, L).activations;
  };
  EXPECT_GT(acts(Recompute::kNone), acts(Recompute::kAttention));
  EXPECT_GT(acts(Recompute::kNone), acts(Recompute::kMoe));
  EXPECT_GT(acts(Recompute::kAttention), acts(Recompute::kFull));
  EXPECT_GT(acts(Recompute::kMoe), acts(Recompute::kFull));
  // zaya.cpp keeps its f32 parameters and, under bf16 GEMMs, a bf16 copy of all of them.
  auto memory = [&](const char* dtype, Recompute r) {
    L.dtype = dtype;
    L.recompute = r;
    return predict_memory(c, L);
  };
  const MemoryPrediction f32 = memory("f32", Recompute::kNone), bf16 = memory("bf16", Recompute::kNone);
  EXPECT_DOUBLE_EQ(f32.weights, f32.params_held * 4);
  EXPECT_DOUBLE_EQ(bf16.weights, bf16.params_held * 6);
  // float32 activations in both precisions, but for the inputs only GEMMs
  // read, kept in bf16 where their block kind is not recomputed.
  EXPECT_LT(bf16.activations, f32.activations);
  EXPECT_LT(memory("bf16", Recompute::kMoe).activations, memory("f32", Recompute::kMoe).activations);
  EXPECT_LT(memory("bf16", Recompute::kAttention).activations, memory("f32", Recompute::kAttention).activations);
  EXPECT_DOUBLE_EQ(memory("bf16", Recompute::kFull).activations, memory("f32", Recompute::kFull).activations);
}

TEST(RecomputeModel, TheRecomputedForwardCostsTimeButNoModelFlops) {
  const GemmModel g(*find_builtin_profile("h200"));
  const ZayaConfig c = preset_config("small");
  TrainLayout L;
  L.micro_batch = 8;
  L.seq_len = 256;
  L.dtype = "bf16";
  auto step = [&](Recompute r) {
    L.recompute = r;
    return predict_step(c, L, g);
  };
  const StepPrediction none = step(Recompute::kNone), attention = step(Recompute::kAttention);
  const StepPrediction moe = step(Recompute::kMoe), full = step(Recompute::kFull);
  EXPECT_EQ(none.recompute_gemm + none.recompute_stream + none.recompute_flops, 0);
  for (const StepPrediction* p : {&attention, &moe, &full}) {
    EXPECT_GT(p->recompute_gemm, 0);
    EXPECT_GT(p->recompute_stream, 0);
    EXPECT_NEAR(p->compute, none.compute + p->recompute_gemm + p->recompute_stream, 1e-12);
    EXPECT_EQ(p->model_flops_per_rank, none.model_flops_per_rank);
    EXPECT_LT(p->mfu, none.mfu);
  }
  EXPECT_NEAR(full.recompute_flops, attention.recompute_flops + moe.recompute_flops, 1e-6 * full.recompute_flops);
  // Full recomputation repeats every forward GEMM but the LM head's.
  double forward = 0, head = 0;
  for (const GemmTime& t : none.gemms)
    if (t.gemm.phase == "fwd")
      (t.gemm.name.rfind("lm_head", 0) == 0 ? head : forward) += t.gemm.count * t.gemm.shape.flops();
  EXPECT_GT(head, 0);
  EXPECT_NEAR(full.recompute_flops, forward, 1e-9 * forward);
}

}  // namespace
}  // namespace zaya
