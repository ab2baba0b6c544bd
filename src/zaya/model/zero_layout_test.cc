// ZeRO-1 shards (dist/zero.h) of the model's parameter table.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "zaya/model/params.h"

namespace zaya {
namespace {

// Shards cut at tensor boundaries, cover the region exactly, and are balanced
// to within the largest tensor for any rank count.
TEST(Zero, ShardBoundariesAreBalancedAtTensorBoundaries) {
  ZayaConfig c = preset_config("small");
  ParamTable t(c, true);
  const ZeroLayout layout = zero_layout(t);
  const size_t n_dense = layout.dense_count;
  std::set<int64_t> starts;
  int64_t largest = 0;
  for (const ParamEntry& e : t.entries()) {
    starts.insert(e.offset);
    largest = std::max(largest, e.numel);
  }
  starts.insert(t.total_floats());
  for (int parts : {1, 2, 3, 4, 7}) {
    for (auto [first, last] : {std::pair<size_t, size_t>{0, n_dense}, {n_dense, t.entries().size()}}) {
      std::vector<int64_t> b = shard_boundaries(layout, first, last, parts);
      ASSERT_EQ(b.size(), size_t(parts + 1));
      const int64_t begin = t.entries()[first].offset;
      const int64_t end = t.entries()[last - 1].offset + t.entries()[last - 1].numel;
      EXPECT_EQ(b.front(), begin);
      EXPECT_EQ(b.back(), end);
      for (int k = 0; k < parts; ++k) {
        EXPECT_LE(b[k], b[k + 1]);
        EXPECT_TRUE(starts.count(b[k])) << "boundary inside a tensor";
        const double share = double(end - begin) / parts;
        EXPECT_LE(std::abs(double(b[k + 1] - b[k]) - share), double(largest)) << parts << " parts";
      }
    }
  }
}

}  // namespace
}  // namespace zaya

namespace zaya {
namespace {

// Every tensor is owned by exactly one rank of every layout (dp x ep).
TEST(Zero, EveryTensorHasExactlyOneOwner) {
  ZayaConfig c = preset_config("tiny");
  for (auto [dp, ep] : {std::pair{1, 1}, {3, 1}, {2, 2}, {1, 4}, {3, 2}}) {
    std::map<std::string, int> owners;
    const int world = dp * ep, local = int(c.experts) / ep;
    for (int r = 0; r < world; ++r) {
      ParamTable t(c, true, ExpertRange{(r % ep) * local, local});
      for (size_t i : zero_owned_entries(zero_layout(t), r, world, r / ep, dp)) ++owners[t.entries()[i].name];
    }
    ParamTable full(c, true);
    EXPECT_EQ(owners.size(), full.entries().size()) << dp << "x" << ep;
    for (const auto& [name, n] : owners) EXPECT_EQ(n, 1) << name << " in " << dp << "x" << ep;
  }
}

}  // namespace
}  // namespace zaya

namespace zaya {
namespace {

// A bf16 parameter all-gather carries exactly the GEMM weights (the matrices,
// read only through the bf16 weight copy); the embedding (also read by the
// lookup), the norms, biases, scales and convolutions travel as float32.
TEST(Zero, Bf16GatherMarksTheGemmWeights) {
  ParamTable t(preset_config("small"), true);
  const ZeroLayout layout = zero_layout(t);
  ASSERT_EQ(layout.tensors.size(), t.entries().size());
  int64_t bf16 = 0;
  for (size_t i = 0; i < t.entries().size(); ++i) {
    const ParamEntry& e = t.entries()[i];
    const bool gemm =
        e.role == TensorRole::kAttnQ || e.role == TensorRole::kAttnK || e.role == TensorRole::kAttnVCurrent ||
        e.role == TensorRole::kAttnVDelayed || e.role == TensorRole::kAttnOut || e.role == TensorRole::kRouterDown ||
        e.role == TensorRole::kRouterFc1 || e.role == TensorRole::kRouterFc2 || e.role == TensorRole::kRouterOut ||
        e.role == TensorRole::kExpertFc1 || e.role == TensorRole::kExpertFc2;
    EXPECT_EQ(layout.tensors[i].bf16_gather, gemm) << e.name;
    if (gemm) bf16 += e.numel;
  }
  EXPECT_GT(double(bf16), 0.5 * double(t.total_floats()));  // most of the bytes
}

}  // namespace
}  // namespace zaya
