#include "zaya/ops/moe_dispatch.h"

#include <gtest/gtest.h>

#include <vector>

#include "zaya/ops/grad_check.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

TEST(MoeDispatch, PlanIsStableCountingSort) {
  // 6 tokens, top-1, 3 experts; slot 3 = skip.
  std::vector<int32_t> choice = {2, 0, 3, 2, 0, 1};
  ExpertPlan plan;
  plan.reserve(3, 6, 1);
  build_expert_plan(plan, choice.data(), 6, 1);
  EXPECT_EQ(plan.rows, 5);
  EXPECT_EQ((std::vector<int64_t>{0, 2, 3, 5}), plan.offsets);
  EXPECT_EQ((std::vector<int32_t>{1, 4, 5, 0, 3}),
            std::vector<int32_t>(plan.row_token.begin(), plan.row_token.begin() + 5));
  EXPECT_EQ((std::vector<int32_t>{3, 0, -1, 4, 1, 2}), plan.choice_row);
}

TEST(MoeDispatch, CombineGradients) {
  const int64_t T = 5, K = 2, D = 3, E = 3, skip = 3;
  std::vector<int32_t> choice = {0, 2, 3, -1, 1, 0, 2, 3, 1, 2};
  ExpertPlan plan;
  plan.reserve(E, T, K);
  build_expert_plan(plan, choice.data(), T, K);
  Vec y = random_vector(plan.rows * D, 1), x = random_vector(T * D, 2), gate = random_vector(T * K, 3),
      probe = random_vector(T * D, 4);
  auto loss = [&] {
    Vec out(T * D);
    combine_forward<double>(out.data(), y.data(), x.data(), gate.data(), choice.data(), plan, T, K, D, skip);
    return dot(out, probe);
  };
  Vec dy(plan.rows * D, 0.0), dgate(T * K, 0.0), dx(T * D, 0.0);
  combine_backward<double>(dy.data(), dgate.data(), dx.data(), probe.data(), y.data(), x.data(), gate.data(),
                           choice.data(), plan, T, K, D, skip);
  testing::expect_gradient("combine y", y, dy, loss);
  testing::expect_gradient("combine x (skip path)", x, dx, loss);
  testing::expect_gradient("combine gate", gate, dgate, loss);
  // gather then scatter-add is the adjoint pair
  Vec xp(plan.rows * D);
  gather_rows<double>(xp.data(), x.data(), plan, D);
  Vec back(T * D, 0.0);
  scatter_add_rows<double>(back.data(), dy.data(), plan, T, K, D);
  EXPECT_NEAR(dot(xp, dy), dot(x, back), 1e-12);
}

}  // namespace
}  // namespace zaya
