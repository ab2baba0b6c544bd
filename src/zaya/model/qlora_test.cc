// LoRA over a quantized base (QLoRA, docs/training.md "LoRA over a quantized
// base"): a model whose routed experts are held only as packed MXFP4, FP8 or
// int8 rows (model/model.h, ops/quant_linear.h) computes the loss and the
// adapters' gradients of a float32 model holding the dequantized values, up to
// float32 summation order (the dequantized values are exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "zaya/core/test_util.h"
#include "zaya/model/lora_test_util.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

constexpr int64_t kB = 2, kS = 8;

// The shared test model with an expert width MXFP4 and int8 rows allow (a multiple of 32).
ZayaConfig qlora_config() {
  ZayaConfig c = testing::model_test_config();
  c.expert_ffn = 32;
  return c;
}

struct Result {
  double loss = 0;
  std::vector<float> grads;  // the adapters'
};

Result loss_and_adapter_grads(const ZayaModel& model, const LoraConfig& lc, bool bf16) {
  const ZayaConfig& c = model.config();
  LoraAdapters adapters(c, lc);
  testing::randomize(adapters, 5);
  const_cast<ZayaModel&>(model).set_lora(&adapters);
  ModelWorkspace ws(c, kB, kS, true, nullptr, nullptr, Recompute::kNone,
                    bf16 ? bf16_kept_inputs(&lc) : Bf16KeptInputs{});
  if (bf16) ws.reserve_bf16_gemms();
  ws.enable_lora(c, adapters.config());
  std::vector<int32_t> ids(kB * kS), targets(kB * kS);
  for (int64_t i = 0; i < kB * kS; ++i) {
    ids[size_t(i)] = int32_t((i * 37 + 5) % 90);
    targets[size_t(i)] = int32_t((i * 11 + 3) % 90);
  }
  Result r;
  r.loss = model_forward(model, ws, ids.data(), targets.data(), kB, kS, {}).xent_mean();
  r.grads.assign(size_t(adapters.total_floats()), 0.0f);
  const ModelWeights g = bind_weights(c, model.params(), nullptr);
  const LoraViews gv = adapters.bind(r.grads.data());
  model_backward(model, ws, g, 1.0f / float(kB * kS), 0.5f, {}, nullptr, &gv);
  const_cast<ZayaModel&>(model).set_lora(nullptr);
  return r;
}

TEST(Qlora, QuantizedExpertsGiveTheLossAndAdapterGradientsOfTheirDequantizedValues) {
  const ZayaConfig c = qlora_config();
  const LoraConfig lc = testing::lora_config(0, all_lora_targets());
  for (WeightType type : {WeightType::kMXFP4, WeightType::kFP8, WeightType::kI8}) {
    SCOPED_TRACE(weight_type_name(type));
    ZayaModel q(c, {}, ParamStorage::kF32, type);
    q.init(1);  // the experts quantized as they are set
    EXPECT_EQ(q.expert_type(), type);
    // The float32 reference holds every tensor as q does, the experts dequantized.
    ZayaModel f(c);
    std::vector<float> v;
    int64_t changed = 0, expert_floats = 0;
    ZayaModel plain(c);
    plain.init(1);
    for (const ParamEntry& e : f.params().entries()) {
      v.resize(size_t(e.numel));
      q.read_param(e, v.data());
      f.set_param(e, v.data());
      if (e.role == TensorRole::kExpertFc1 || e.role == TensorRole::kExpertFc2) {
        expert_floats += e.numel;
        const float* p = plain.param_data() + e.offset;
        for (int64_t i = 0; i < e.numel; ++i) changed += v[size_t(i)] != p[i];
      }
    }
    EXPECT_GT(changed, expert_floats / 4);  // quantization moved the experts' values
    const Result want = loss_and_adapter_grads(f, lc, false), got = loss_and_adapter_grads(q, lc, false);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::fabs(want.loss));
    float scale = 0;
    for (float x : want.grads) scale = std::fmax(scale, std::fabs(x));
    ASSERT_GT(scale, 0.0f);
    float worst = 0;
    for (size_t i = 0; i < want.grads.size(); ++i) worst = std::fmax(worst, std::fabs(got.grads[i] - want.grads[i]));
    EXPECT_LE(worst, 1e-4f * scale);
  }
}

// Under a frozen bf16 base (train.precision = "bf16"), the quantized experts still run over their packed rows in
// float32 (the other matrices in bf16): the loss is the float32 QLoRA loss to bf16 rounding of the rest.
TEST(Qlora, AFrozenBf16BaseKeepsItsExpertsQuantized) {
  const ZayaConfig c = qlora_config();
  const LoraConfig lc = testing::lora_config(0, testing::kExperts);
  ZayaModel q32(c, {}, ParamStorage::kF32, WeightType::kMXFP4);
  q32.init(1);
  ZayaModel q16(c, {}, ParamStorage::kFrozenBf16, WeightType::kMXFP4);
  q16.init(1);
  q16.enable_bf16_gemms();
  // The bf16 arena holds no copy of the quantized experts, nor do the float32 pages.
  int64_t expert_floats = 0;
  for (const ParamEntry& e : q16.params().entries())
    if (e.role == TensorRole::kExpertFc1 || e.role == TensorRole::kExpertFc2) expert_floats += e.numel;
  EXPECT_EQ(q16.bf16_param_bytes(), 2 * (q16.params().total_floats() - expert_floats));
  EXPECT_GT(q16.quant_param_bytes(), 0);
  EXPECT_EQ(q16.quant_param_bytes(), q32.quant_param_bytes());
  const Result a = loss_and_adapter_grads(q32, lc, false), b = loss_and_adapter_grads(q16, lc, true);
  EXPECT_NEAR(a.loss, b.loss, 2e-2 * std::fabs(a.loss));
  EXPECT_GT(std::count_if(b.grads.begin(), b.grads.end(), [](float x) { return x != 0.0f; }), 0);
}

TEST(Qlora, PackedRowsAreTakenAsStoredAndWidthsMustFitTheBlocks) {
  const ZayaConfig c = qlora_config();
  ZayaModel q(c, {}, ParamStorage::kF32, WeightType::kMXFP4);
  q.init(1);
  const ParamEntry* fc2 = nullptr;
  for (const ParamEntry& e : q.params().entries())
    if (e.role == TensorRole::kExpertFc2) fc2 = &e;
  ASSERT_NE(fc2, nullptr);
  EXPECT_TRUE(q.holds_packed(*fc2, WeightType::kMXFP4));
  EXPECT_FALSE(q.holds_packed(*fc2, WeightType::kFP8));
  const int64_t rows = fc2->shape[0], cols = fc2->shape[1], rb = weight_row_bytes(WeightType::kMXFP4, cols);
  std::vector<uint8_t> packed(size_t(rows * rb));
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = uint8_t((i * 29 + 3) % 251);  // scale bytes < 255
  q.set_param_packed(*fc2, packed.data());
  std::vector<float> got(size_t(fc2->numel)), want(got.size());
  q.read_param(*fc2, got.data());
  for (int64_t r = 0; r < rows; ++r) weight_row_f32(WeightType::kMXFP4, packed.data(), cols, r, want.data() + r * cols);
  EXPECT_EQ(got, want);
  ZayaConfig narrow = testing::model_test_config();  // expert_ffn 12
  testing::expect_error([&] { ZayaModel m(narrow, {}, ParamStorage::kF32, WeightType::kMXFP4); }, "multiple of 32");
}

}  // namespace
}  // namespace zaya
