// Precision is an argument, not process state (ops/precision.h): models with
// bf16 GEMMs and float32 models in one process, their passes interleaved or
// run on two threads at once, each get the bits they get alone. Every bf16
// pass reads only its own workspace's Bf16Context (scratch, GEMM primitives)
// and its own model's bf16 copy.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

constexpr int64_t kPcBatch = 2, kPcSeq = 16;

// One model with its workspace and gradient arena, trained on two fixed
// micro-batches of its own.
class Trainee {
 public:
  Trainee(const ZayaConfig& c, bool bf16, uint64_t seed)
      : c_(c),
        seed_(seed),
        model_(c),
        ws_(c, kPcBatch, kPcSeq, true, nullptr, nullptr, Recompute::kNone,
            bf16 ? bf16_kept_inputs(nullptr) : Bf16KeptInputs{}) {
    model_.init(seed);
    if (bf16) {
      model_.enable_bf16_gemms();
      ws_.reserve_bf16_gemms();
    }
    grads_.assign(size_t(model_.params().total_floats()), 0.0f);
    g_ = bind_weights(c, model_.params(), grads_.data());
  }

  void forward(int micro) {
    std::vector<int32_t> ids(kPcBatch * kPcSeq), targets(kPcBatch * kPcSeq);
    for (int64_t i = 0; i < kPcBatch * kPcSeq; ++i) {
      ids[i] = int32_t(philox4x32(seed_, uint64_t(micro), uint64_t(i))[0] % uint32_t(c_.real_vocab_size));
      targets[i] = int32_t(philox4x32(seed_ + 1, uint64_t(micro), uint64_t(i))[0] % uint32_t(c_.real_vocab_size));
    }
    losses_.push_back(model_forward(model_, ws_, ids.data(), targets.data(), kPcBatch, kPcSeq, kLoss).xent_sum);
    logits_.insert(logits_.end(), ws_.logits(), ws_.logits() + ws_.rows() * c_.vocab_size);
  }
  void backward() { model_backward(model_, ws_, g_, 1.0f / float(2 * kPcBatch * kPcSeq), 0.5f, kLoss); }
  void train() {
    for (int micro = 0; micro < 2; ++micro) {
      forward(micro);
      backward();
    }
  }

  std::vector<double> losses_;
  std::vector<float> logits_, grads_;

 private:
  static constexpr MoeLossOptions kLoss{0.01f, 0.001f};
  ZayaConfig c_;
  uint64_t seed_;
  ZayaModel model_;
  ModelWorkspace ws_;
  ModelWeights g_;
};

void expect_solo_bits(const Trainee& want, const Trainee& got, const std::string& what) {
  EXPECT_EQ(want.losses_, got.losses_) << what;
  ASSERT_EQ(want.logits_.size(), got.logits_.size());
  EXPECT_EQ(0, std::memcmp(want.logits_.data(), got.logits_.data(), sizeof(float) * want.logits_.size()))
      << "logits differ: " << what;
  ASSERT_EQ(want.grads_.size(), got.grads_.size());
  EXPECT_EQ(0, std::memcmp(want.grads_.data(), got.grads_.data(), sizeof(float) * want.grads_.size()))
      << "gradients differ: " << what;
}

// A second shape of bf16 model: wider, other head counts, so its scratch and
// GEMM shapes differ from the first's.
ZayaConfig wider_config() {
  ZayaConfig c = testing::model_test_config();
  c.hidden = 48;
  c.q_heads = 6;
  c.kv_heads = 3;
  c.expert_ffn = 20;
  return c;
}

TEST(PrecisionContext, InterleavedModelsGetTheirSoloBits) {
  const ZayaConfig small = testing::model_test_config(), wide = wider_config();
  Trainee bf16_solo(small, true, 7), f32_solo(small, false, 8), wide_solo(wide, true, 9), f32_twin(small, false, 7);
  bf16_solo.train();
  f32_solo.train();
  wide_solo.train();
  f32_twin.train();
  // The bf16 model really ran in bf16: its float32 twin (same weights, same data) differs.
  EXPECT_NE(bf16_solo.losses_, f32_twin.losses_);

  Trainee bf16(small, true, 7), f32(small, false, 8), wider(wide, true, 9);
  bf16.forward(0);
  f32.forward(0);
  wider.forward(0);
  f32.backward();
  bf16.backward();
  wider.backward();
  wider.forward(1);
  f32.forward(1);
  bf16.forward(1);
  wider.backward();
  bf16.backward();
  f32.backward();
  expect_solo_bits(bf16_solo, bf16, "bf16 model interleaved with two others");
  expect_solo_bits(f32_solo, f32, "float32 model interleaved with two bf16 ones");
  expect_solo_bits(wide_solo, wider, "wider bf16 model interleaved with two others");
}

// Two bf16 models trained at the same time on two threads (as a trainer and an
// evaluation or rollout thread would be): no scratch or primitive is shared.
TEST(PrecisionContext, ConcurrentBf16ModelsGetTheirSoloBits) {
  const ZayaConfig small = testing::model_test_config(), wide = wider_config();
  Trainee small_solo(small, true, 11), wide_solo(wide, true, 12);
  small_solo.train();
  wide_solo.train();
  const int threads = omp_get_max_threads();  // each thread's own OpenMP teams: the same size as the solo runs'
  for (int round = 0; round < 3; ++round) {
    auto a = std::make_unique<Trainee>(small, true, 11);
    auto b = std::make_unique<Trainee>(wide, true, 12);
    std::thread ta([&] {
      omp_set_num_threads(threads);
      a->train();
    });
    std::thread tb([&] {
      omp_set_num_threads(threads);
      b->train();
    });
    ta.join();
    tb.join();
    expect_solo_bits(small_solo, *a, "bf16 model beside another on a second thread, round " + std::to_string(round));
    expect_solo_bits(wide_solo, *b,
                     "wider bf16 model beside another on a second thread, round " + std::to_string(round));
  }
}

}  // namespace
}  // namespace zaya
