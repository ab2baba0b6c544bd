// The whole model against an independent PyTorch implementation
// (tools/zaya_ref.py, computed in float64): logits, loss and every parameter
// gradient, with and without the router's auxiliary losses. The golden files
// in tests/data/golden are made by tools/make_golden.py and exercise every
// path: skip tokens, biased selection that differs from plain argmax, EDA over
// three MoE layers, an ignored target and padded vocabulary rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/formats/golden_fixture.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/io/safetensors_file.h"
#include "zaya/model/model.h"

namespace zaya {
namespace {

// max |a - b| / max |b| over a tensor (b = reference).
double relative_error(const float* a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / scale;
}

void check_case(bool with_aux) {
  Golden g;
  const ZayaConfig& c = g.model->config();
  ModelWorkspace ws(c, g.B, g.S, true);
  MoeLossOptions loss;
  if (with_aux) loss = {0.01f, 0.001f};
  LossParts parts = model_forward(*g.model, ws, g.ids.data(), g.targets.data(), g.B, g.S, loss);
  // Logits (all V columns, before any masking).
  std::vector<float> logits = g.tensor("logits", {g.B, g.S, c.vocab_size});
  const double logits_error = relative_error(ws.logits(), logits);  // before backward reuses the buffer
  EXPECT_LT(logits_error, 1e-5) << "logits";
  const float want = g.tensor(with_aux ? "loss_with_aux" : "loss", {1})[0];
  EXPECT_NEAR(parts.xent_mean() + parts.router_loss, want, 2e-5 * std::fabs(want));
  EXPECT_EQ(parts.xent_tokens, g.B * g.S - 1);  // exactly one ignored target
  // Gradients of every parameter.
  Arena grad(g.model->params().total_floats());
  grad.zero();
  ModelWeights gw = bind_weights(c, g.model->params(), grad.data());
  model_backward(*g.model, ws, gw, 1.0f / float(parts.xent_tokens), 1.0f, loss);
  int checked = 0;
  double worst = 0;
  for (const ParamEntry& e : g.model->params().entries()) {
    std::vector<float> ref = g.tensor((with_aux ? "grad_aux." : "grad.") + e.name, e.shape);
    const double err = relative_error(grad.data() + e.offset, ref);
    EXPECT_LT(err, 3e-5) << e.name;
    worst = std::max(worst, err);
    ++checked;
  }
  EXPECT_EQ(checked, int(g.model->params().entries().size()));
  std::printf("worst relative gradient error %.3g, logits %.3g\n", worst, logits_error);
}

TEST(Golden, LogitsLossAndGradientsMatchPyTorch) { check_case(false); }
TEST(Golden, WithSwitchAuxAndZLoss) { check_case(true); }

// The routing decisions must be the reference's (the golden seed keeps every
// biased-score margin above 2e-3, far above float32 noise).
TEST(Golden, RoutingMatchesReference) {
  Golden g;
  const ZayaConfig& c = g.model->config();
  ModelWorkspace ws(c, g.B, g.S, false);
  model_forward(*g.model, ws, g.ids.data(), g.targets.data(), g.B, g.S, {});
  int64_t skipped = 0;
  for (int64_t l = 0; l < c.num_blocks; ++l) {
    std::vector<int32_t> ref(g.B * g.S);
    g.file.read_i32("routing." + std::to_string(2 * l + 1), ref.data(), {g.B, g.S, 1});
    const auto& counts = ws.routing()[l].choices_N;
    std::vector<double> ref_counts(c.router_slots(), 0.0);
    for (int32_t slot : ref) ref_counts[slot] += 1;
    EXPECT_EQ(counts, ref_counts) << "MoE half-layer " << 2 * l + 1;
    skipped += int64_t(counts[c.skip_slot()]);
  }
  EXPECT_GT(skipped, 0);
}

}  // namespace
}  // namespace zaya
