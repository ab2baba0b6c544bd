// --dtype mxfp4-all and mxfp4-all-q8head (docs/inference.md, "Every matrix in
// MXFP4"): which matrices become MXFP4 at load, their bytes, and the logits
// against an f32 model holding the very values the MXFP4 (and bf16, Q8_0)
// matrices decode to. With float32 activations (ZAYA_MXFP4_ACTIVATIONS=float:
// ops/matvec_lowbit.h in decode, an sgemm over exactly dequantized tiles in
// prefill) the two compute the same products, so they agree within float
// noise; with the default int8 activations (ops/matvec_mxfp4_q8.h) each
// product also carries the activations' Q8 rounding (at most half a block's
// scale per value), the error int8 models accept: within kInt8ActivationBound.
// CTest runs this file twice, once with each setting (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/test_util.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/test_util.h"
#include "zaya/ops/matvec_mxfp4_q8.h"

namespace zaya {
namespace mxfp4_all_test {

using testing::logits_error;
using testing::random_tokens;

// Float noise: the same products in another summation order (engine_test.cc's bound for the same comparison).
constexpr double kFloatNoise = 2e-5;
// int8 activations: measured 0.0069 (mxfp4-all, decode) and 0.0073 (mxfp4-all-q8head) on this model; int8
// weights' own bound is 0.03 (Engine.Int8WeightsStayCloseToF32), and this error is the activations' share of it.
// The Q8_0 head of mxfp4-all-q8head always takes int8 activations (ops/matvec_q8.h), whatever the MXFP4 setting.
constexpr double kInt8ActivationBound = 0.02;

// small_test_config with experts 64 wide, so that fc2's rows are whole 32-blocks too.
ZayaConfig mxfp4_config() {
  ZayaConfig c = testing::small_test_config();
  c.expert_ffn = 64;
  return c;
}

// The matrix of an InferModel holding the 2-D parameter `e` (null for the grouped conv, 3-D, and the vectors).
const WeightMatrix* matrix_of(const InferWeights& w, const ParamEntry& e) {
  const size_t b = size_t(std::max(e.half_layer, 0) / 2);
  switch (e.role) {
    case TensorRole::kEmbedding: return &w.embed;
    case TensorRole::kLmHead: return &w.lm_head;
    case TensorRole::kAttnQ: return &w.attn[b].q;
    case TensorRole::kAttnK: return &w.attn[b].k;
    case TensorRole::kAttnVCurrent: return &w.attn[b].v_cur;
    case TensorRole::kAttnVDelayed: return &w.attn[b].v_prev;
    case TensorRole::kAttnOut: return &w.attn[b].o;
    case TensorRole::kRouterDown: return &w.moe[b].down;
    case TensorRole::kRouterFc1: return &w.moe[b].mlp0;
    case TensorRole::kRouterFc2: return &w.moe[b].mlp2;
    case TensorRole::kRouterOut: return &w.moe[b].mlp4;
    case TensorRole::kExpertFc1: return &w.moe[b].fc1[size_t(e.expert)];
    case TensorRole::kExpertFc2: return &w.moe[b].fc2[size_t(e.expert)];
    default: return nullptr;
  }
}

// `into` (a copy of the model `q` was made from) given the values q's matrices decode to: MXFP4 and Q8_0 rows
// dequantized, bf16 ones widened; the grouped conv (bf16 in q, repacked) rounded to bf16 in place.
void hold_decoded_values(const InferModel& q, ZayaModel& into) {
  for (const ParamEntry& e : into.params().entries()) {
    float* p = into.param_data() + e.offset;
    if (e.role == TensorRole::kConvGrouped) {
      ASSERT_EQ(q.weights().attn[0].conv_b.type, WeightType::kBF16);
      for (int64_t i = 0; i < e.numel; ++i) p[i] = bf16_to_float(float_to_bf16(p[i]));
      continue;
    }
    const WeightMatrix* w = e.shape.size() == 2 ? matrix_of(q.weights(), e) : nullptr;
    if (w == nullptr) continue;
    ASSERT_EQ(w->rows, e.shape[0]) << e.name;
    ASSERT_EQ(w->cols, e.shape[1]) << e.name;
    for (int64_t r = 0; r < w->rows; ++r) w->row_f32(r, p + r * w->cols);
  }
}

// Prefill `prefill` tokens in one step, then one token per step: every position's logits [S, V].
std::vector<float> prefill_and_decode(InferenceEngine& engine, const std::vector<int32_t>& ids, int64_t prefill) {
  const int64_t V = engine.config().vocab_size, S = int64_t(ids.size());
  std::vector<float> out(S * V);
  engine.reset(0);
  StepChunk first{0, ids.data(), prefill, LogitsWanted::kAll};
  engine.step({&first, 1});
  engine.logits(0, prefill, out.data());
  for (int64_t t = prefill; t < S; ++t) {
    StepChunk one{0, ids.data() + t, 1, LogitsWanted::kLast};
    engine.step({&one, 1});
    engine.logits(0, 1, out.data() + t * V);
  }
  return out;
}

TEST(Mxfp4All, EveryStreamedMatrixIsMxfp4) {
  const ZayaConfig c = mxfp4_config();
  auto model = testing::random_model(c, 23);
  auto q4 = InferModel::from_model(*model, "mxfp4-all");
  EXPECT_EQ(q4->matrix_dtype(), "mxfp4-all+bf16");
  const InferWeights& w = q4->weights();
  for (const InferAttention& a : w.attn)
    for (const WeightMatrix* m : {&a.q, &a.k, &a.v_cur, &a.v_prev, &a.o}) EXPECT_EQ(m->type, WeightType::kMXFP4);
  for (const InferMoe& mo : w.moe) {
    EXPECT_EQ(mo.down.type, WeightType::kMXFP4);
    for (const WeightMatrix* m : {&mo.mlp0, &mo.mlp2, &mo.mlp4}) EXPECT_EQ(m->type, WeightType::kBF16);
    for (int64_t e = 0; e < c.experts; ++e) {
      EXPECT_EQ(mo.fc1[size_t(e)].type, WeightType::kMXFP4);
      EXPECT_EQ(mo.fc2[size_t(e)].type, WeightType::kMXFP4);
    }
  }
  EXPECT_EQ(w.attn[1].conv_b.type, WeightType::kBF16);
  EXPECT_EQ(w.embed.type, WeightType::kMXFP4);  // the tied head; the lookup dequantizes a row
  EXPECT_EQ(w.lm_head.data, w.embed.data);
  const int64_t D = c.hidden, F = c.expert_ffn;
  EXPECT_EQ(q4->weight_bytes().per_expert, 2 * F * mxfp4_row_bytes(D) + D * mxfp4_row_bytes(F));
  EXPECT_EQ(q4->weight_bytes().lm_head, c.vocab_size * mxfp4_row_bytes(D));
  EXPECT_EQ(q4->weight_bytes().dense, q4->weight_bytes().attention + q4->weight_bytes().router + 4 * 5 * D);
  EXPECT_EQ(w.attn[2].o.bytes(), c.hidden * mxfp4_row_bytes(c.q_width()));
  EXPECT_EQ(w.moe[1].down.bytes(), c.router_hidden * mxfp4_row_bytes(D));

  // The LM head in Q8_0, the rest as above.
  auto q8head = InferModel::from_model(*model, "mxfp4-all-q8head");
  EXPECT_EQ(q8head->matrix_dtype(), "mxfp4-all+int8+bf16");
  EXPECT_EQ(q8head->weights().embed.type, WeightType::kI8);
  EXPECT_EQ(q8head->weights().attn[0].q.type, WeightType::kMXFP4);
  EXPECT_EQ(q8head->weights().moe[2].fc2[1].type, WeightType::kMXFP4);
  EXPECT_EQ(q8head->weights().moe[2].down.type, WeightType::kMXFP4);

  // An untied model: the LM head MXFP4, the embedding (rows gathered, never streamed) bf16.
  ZayaConfig untied = c;
  untied.tie_word_embeddings = false;
  auto u = InferModel::from_model(*testing::random_model(untied, 24), "mxfp4-all");
  EXPECT_EQ(u->weights().lm_head.type, WeightType::kMXFP4);
  EXPECT_EQ(u->weights().embed.type, WeightType::kBF16);

  testing::expect_error([&] { InferModel::from_model(*model, "q4"); },
                        "dtype 'q4' is invalid; allowed: auto, bf16, f32, int8, mxfp4, fp8, int8-mxfp4, int8-fp8, "
                        "mxfp4-all, mxfp4-all-q8head");
}

// Quantized at load from a float checkpoint on disk: the same matrices as from the model in memory.
TEST(Mxfp4All, QuantizedAtLoadFromAFloatDirectory) {
  const ZayaConfig c = mxfp4_config();
  auto model = testing::random_model(c, 25);
  testing::TempDir dir;
  HfSaveOptions save;
  save.dtype = "f32";
  save_hf_model(*model, dir.path(), save);
  InferLoadOptions o;
  o.dtype = "mxfp4-all";
  auto loaded = InferModel::load(dir.path(), o);
  auto mem = InferModel::from_model(*model, "mxfp4-all");
  EXPECT_EQ(loaded->matrix_dtype(), "mxfp4-all+bf16");
  EXPECT_EQ(loaded->weight_bytes().total, mem->weight_bytes().total);
  const WeightMatrix &a = loaded->weights().moe[1].fc1[2], &b = mem->weights().moe[1].fc1[2];
  ASSERT_EQ(a.type, WeightType::kMXFP4);
  const auto* pa = static_cast<const uint8_t*>(a.data);
  const auto* pb = static_cast<const uint8_t*>(b.data);
  EXPECT_TRUE(std::equal(pa, pa + a.bytes(), pb));  // f32 on disk, f32 in memory: the same blocks
}

TEST(Mxfp4All, LogitsEqualTheDequantizedFloatModel) {
  const ZayaConfig c = mxfp4_config();
  const bool int8_act = mxfp4_int8_activations();
  const std::vector<int32_t> ids = random_tokens(24, c.real_vocab_size, 7);
  for (const char* dtype : {"mxfp4-all", "mxfp4-all-q8head"}) {
    const double bound = int8_act || dtype == std::string("mxfp4-all-q8head") ? kInt8ActivationBound : kFloatNoise;
    auto model = testing::random_model(c, 27);
    auto q4 = InferModel::from_model(*model, dtype);
    auto decoded = testing::random_model(c, 27);
    hold_decoded_values(*q4, *decoded);
    auto ref = InferModel::from_model(*decoded, "f32");
    auto orig = InferModel::from_model(*model, "f32");
    EngineOptions o;
    o.max_context = 32;
    o.bf16_activations = false;  // the bf16 matrices (router MLP, conv) on the exact kernel, an f32 KV cache
    InferenceEngine eq(*q4, o), er(*ref, o), eo(*orig, o);
    const std::vector<float> want = prefill_and_decode(er, ids, 24);
    const int64_t V = c.vocab_size, Vr = c.real_vocab_size;
    for (int64_t prefill : {24, 3}) {  // prefill (past 16 rows: the tile sgemm) and decode (the matvec kernels)
      const std::vector<float> got = prefill_and_decode(eq, ids, prefill);
      const double err = logits_error(got.data(), want.data(), 24, V, Vr);
      EXPECT_LT(err, bound) << dtype << ", prefill " << prefill << ", int8 activations " << int8_act;
      // The decoded weights really differ from the float ones.
      const std::vector<float> f32 = prefill_and_decode(eo, ids, prefill);
      EXPECT_GT(logits_error(got.data(), f32.data(), 24, V, Vr), 20 * kFloatNoise) << dtype;
    }
  }
}

}  // namespace mxfp4_all_test
}  // namespace zaya
