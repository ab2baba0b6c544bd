#include "zaya/ops/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "zaya/ops/grad_check.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/routing.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

// One test case: sizes, EDA or not, skip slot or not.
struct Case {
  int64_t T = 5, D = 6, R = 4, N = 4, K = 2, skip = -1;
  bool eda = false;
  double eps = 1e-6;
  RouterShape shape() const { return {T, D, R, N, K, skip, eps}; }
};

struct Params {
  Vec down, down_b, scale, norm, mlp0, mlp0_b, mlp2, mlp2_b, mlp4;
  std::vector<Vec*> all() { return {&down, &down_b, &scale, &norm, &mlp0, &mlp0_b, &mlp2, &mlp2_b, &mlp4}; }
};

Params random_params(const Case& k, uint64_t seed) {
  const int64_t D = k.D, R = k.R, N = k.N;
  Params p;
  p.down = random_vector(R * D, seed + 1, 1.0 / std::sqrt(double(D)));
  p.down_b = random_vector(R, seed + 2, 0.2);
  p.scale = k.eda ? random_vector(R, seed + 3, 0.2, 0.5) : Vec();
  p.norm = random_vector(R, seed + 4, 0.2, 1.0);
  p.mlp0 = random_vector(R * R, seed + 5, 1.0 / std::sqrt(double(R)));
  p.mlp0_b = random_vector(R, seed + 6, 0.2);
  p.mlp2 = random_vector(R * R, seed + 7, 1.0 / std::sqrt(double(R)));
  p.mlp2_b = random_vector(R, seed + 8, 0.2);
  p.mlp4 = random_vector(N * R, seed + 9, 2.0);
  return p;
}

template <typename T>
RouterWeights<T> view(const std::vector<T>* v) {
  auto ptr = [&](int i) -> const T* { return v[i].empty() ? nullptr : v[i].data(); };
  return {ptr(0), ptr(1), ptr(2), ptr(3), ptr(4), ptr(5), ptr(6), ptr(7), ptr(8)};
}

// ---- the plain reference: spec §4 written out, one token at a time ----

struct Ref {
  Vec r, probs, gate;
  std::vector<int32_t> choice;
  double switch_aux = 0, z = 0;
  double margin = 1e30;  // smallest gap between a chosen biased score and the next candidate's
};

double gelu(double u) { return 0.5 * u * (1 + std::erf(u / std::sqrt(2.0))); }

Vec affine(const Vec& W, const Vec* b, const Vec& x, int64_t in, int64_t out) {
  Vec y(out);
  for (int64_t o = 0; o < out; ++o) {
    double s = b != nullptr ? (*b)[o] : 0.0;
    for (int64_t i = 0; i < in; ++i) s += W[o * in + i] * x[i];
    y[o] = s;
  }
  return y;
}

Ref reference(const Case& k, const Params& p, const Vec& x, const Vec* r_prev, const std::vector<float>& bias,
              double aux_coeff, double z_coeff) {
  const int64_t D = k.D, R = k.R, N = k.N, K = k.K;
  Ref out;
  out.r.resize(k.T * R);
  out.probs.resize(k.T * N);
  out.gate.resize(k.T * K);
  out.choice.resize(k.T * K);
  Vec lse(k.T);
  for (int64_t t = 0; t < k.T; ++t) {
    Vec r = affine(p.down, &p.down_b, Vec(x.begin() + t * D, x.begin() + (t + 1) * D), D, R);
    if (k.eda && r_prev != nullptr)
      for (int64_t i = 0; i < R; ++i) r[i] += p.scale[i] * (*r_prev)[t * R + i];
    std::copy(r.begin(), r.end(), out.r.begin() + t * R);
    double ms = 0;
    for (double v : r) ms += v * v / double(R);
    Vec h(R);
    for (int64_t i = 0; i < R; ++i) h[i] = r[i] / std::sqrt(ms + k.eps) * p.norm[i];
    h = affine(p.mlp0, &p.mlp0_b, h, R, R);
    for (double& v : h) v = gelu(v);
    h = affine(p.mlp2, &p.mlp2_b, h, R, R);
    for (double& v : h) v = gelu(v);
    Vec z = affine(p.mlp4, nullptr, h, R, N);
    double zmax = *std::max_element(z.begin(), z.end()), sum = 0;
    for (double v : z) sum += std::exp(v - zmax);
    lse[t] = zmax + std::log(sum);
    for (int64_t e = 0; e < N; ++e) out.probs[t * N + e] = std::exp(z[e] - lse[t]);
    // Biased top-k; biases only choose; after the skip slot the rest is void.
    std::vector<int32_t> order(N);
    std::iota(order.begin(), order.end(), 0);
    auto score = [&](int32_t e) { return out.probs[t * N + e] + bias[e]; };
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score(a) > score(b); });
    for (int64_t j = 0; j + 1 < std::min<int64_t>(K + 1, N); ++j)
      out.margin = std::min(out.margin, score(order[j]) - score(order[j + 1]));
    bool skipped = false;
    for (int64_t j = 0; j < K; ++j) {
      out.choice[t * K + j] = skipped ? kNoExpert : order[j];
      out.gate[t * K + j] = skipped ? 0.0 : out.probs[t * N + order[j]];
      if (order[j] == k.skip) skipped = true;
    }
  }
  // Switch loss: coeff * N * sum_e (share of choices on e) * (mean probability of e).
  int64_t choices = 0;
  Vec f(N, 0.0), P(N, 0.0);
  for (int32_t c : out.choice)
    if (c != kNoExpert) f[c] += 1, ++choices;
  for (int64_t t = 0; t < k.T; ++t)
    for (int64_t e = 0; e < N; ++e) P[e] += out.probs[t * N + e] / double(k.T);
  for (int64_t e = 0; e < N; ++e) out.switch_aux += aux_coeff * double(N) * f[e] / double(choices) * P[e];
  for (int64_t t = 0; t < k.T; ++t) out.z += z_coeff * lse[t] * lse[t] / double(k.T);
  return out;
}

// ---- the op, on vectors ----

template <typename T>
struct OpOut {
  std::vector<T> r, rstd, rn, u1, g1, u2, g2, logits, probs, gate;
  std::vector<int32_t> choice;
  RouterLosses losses;
  RouterActs<T> acts() {
    return {r.data(),  rstd.data(),   rn.data(),    u1.data(),   g1.data(),    u2.data(),
            g2.data(), logits.data(), probs.data(), gate.data(), choice.data()};
  }
};

template <typename T>
OpOut<T> alloc_run(const Case& k) {
  OpOut<T> o;
  for (auto* v : {&o.r, &o.rn, &o.u1, &o.g1, &o.u2, &o.g2}) v->assign(k.T * k.R, T(0));
  o.rstd.assign(k.T, T(0));
  o.logits.assign(k.T * k.N, T(0));
  o.probs.assign(k.T * k.N, T(0));
  o.gate.assign(k.T * k.K, T(0));
  o.choice.assign(k.T * k.K, 0);
  return o;
}

template <typename T>
std::vector<T> cast(const Vec& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
std::vector<std::vector<T>> cast_all(Params& p) {
  std::vector<std::vector<T>> out;
  for (Vec* v : p.all()) out.push_back(cast<T>(*v));
  return out;
}

template <typename T>
OpOut<T> run_op(const Case& k, Params& p, const Vec& x, const Vec* r_prev, const std::vector<float>& bias,
                const RouterLossOptions& loss = {}, bool serial = false, RoutingReplay* replay = nullptr) {
  const std::vector<std::vector<T>> w = cast_all<T>(p);
  const RouterWeights<T> rw = view<T>(w.data());
  RouterArrayProducts<T> products(Precision{}, rw);
  const std::vector<T> xt = cast<T>(x);
  const std::vector<T> rp = r_prev != nullptr ? cast<T>(*r_prev) : std::vector<T>();
  OpOut<T> o = alloc_run<T>(k);
  RouterActs<T> a = o.acts();
  o.losses = router_forward<T>(rw, products, k.shape(), xt.data(), r_prev != nullptr ? rp.data() : nullptr, bias.data(),
                               a, loss, serial, replay);
  return o;
}

template <typename T>
void expect_matches_reference(const Ref& ref, const OpOut<T>& op, double tol) {
  for (size_t i = 0; i < ref.r.size(); ++i) EXPECT_NEAR(double(op.r[i]), ref.r[i], tol) << "r " << i;
  for (size_t i = 0; i < ref.probs.size(); ++i) EXPECT_NEAR(double(op.probs[i]), ref.probs[i], tol) << "p " << i;
  EXPECT_EQ(op.choice, ref.choice);
  for (size_t i = 0; i < ref.gate.size(); ++i) EXPECT_NEAR(double(op.gate[i]), ref.gate[i], tol) << "gate " << i;
  EXPECT_NEAR(op.losses.switch_aux, ref.switch_aux, tol);
  EXPECT_NEAR(op.losses.z, ref.z, tol);
}

std::vector<float> zero_bias(const Case& k) {
  std::vector<float> b(k.N, 0.0f);
  if (k.skip >= 0) b[k.skip] = 0.15f;  // makes the skip slot win for some tokens
  return b;
}

// The three cases: first layer (no EDA) without a skip slot, EDA with a skip slot, EDA without.
std::vector<Case> cases() {
  Case first;
  Case eda_skip;
  eda_skip.eda = true;
  eda_skip.N = 5;
  eda_skip.skip = 4;
  Case eda;
  eda.eda = true;
  eda.K = 1;
  eda.T = 7;
  return {first, eda_skip, eda};
}

TEST(Router, ForwardMatchesReferenceInFloatAndDouble) {
  const RouterLossOptions loss{0.3, 0.02, 1.0};
  int skip_first = 0;
  for (const Case& k : cases()) {
    SCOPED_TRACE(::testing::Message() << "eda " << k.eda << " skip " << k.skip << " K " << k.K);
    Params p = random_params(k, 10);
    const Vec x = random_vector(k.T * k.D, 20);
    const Vec r_prev = random_vector(k.T * k.R, 30);
    const Vec* rp = k.eda ? &r_prev : nullptr;
    const std::vector<float> bias = zero_bias(k);
    const Ref ref = reference(k, p, x, rp, bias, loss.switch_aux_coeff, loss.z_loss_coeff);
    ASSERT_GT(ref.margin, 1e-3) << "a near tie would make the choice test fragile";
    expect_matches_reference(ref, run_op<double>(k, p, x, rp, bias, loss), 1e-12);
    expect_matches_reference(ref, run_op<float>(k, p, x, rp, bias, loss), 2e-5);
    for (int64_t t = 0; t < k.T; ++t) skip_first += k.skip >= 0 && ref.choice[t * k.K] == k.skip;
  }
  EXPECT_GT(skip_first, 0) << "the skip case must route some token to the skip slot first (its later choices void)";
}

TEST(Router, EdaChangesTheState) {
  // With EDA the state differs from the one without, by exactly s * r_prev.
  Case k = cases()[2];
  Params p = random_params(k, 10);
  const Vec x = random_vector(k.T * k.D, 20), r_prev = random_vector(k.T * k.R, 30);
  const std::vector<float> bias = zero_bias(k);
  const OpOut<double> with = run_op<double>(k, p, x, &r_prev, bias);
  const OpOut<double> without = run_op<double>(k, p, x, nullptr, bias);
  for (int64_t t = 0; t < k.T; ++t)
    for (int64_t i = 0; i < k.R; ++i)
      EXPECT_NEAR(with.r[t * k.R + i] - without.r[t * k.R + i], p.scale[i] * r_prev[t * k.R + i], 1e-14);
}

TEST(Router, SerialAndSharedBuffersAreBitIdentical) {
  // The engine's forms: element-wise steps on this thread, u2/g2 sharing u1/g1's buffers.
  Case k = cases()[1];
  Params p = random_params(k, 10);
  const Vec x = random_vector(k.T * k.D, 20), r_prev = random_vector(k.T * k.R, 30);
  const std::vector<float> bias = zero_bias(k);
  const OpOut<float> base = run_op<float>(k, p, x, &r_prev, bias);
  const OpOut<float> serial = run_op<float>(k, p, x, &r_prev, bias, {}, true);
  EXPECT_EQ(base.r, serial.r);
  EXPECT_EQ(base.probs, serial.probs);
  EXPECT_EQ(base.gate, serial.gate);
  EXPECT_EQ(base.choice, serial.choice);

  const std::vector<std::vector<float>> w = cast_all<float>(p);
  const RouterWeights<float> rw = view<float>(w.data());
  RouterArrayProducts<float> products(Precision{}, rw);
  const std::vector<float> xf = cast<float>(x), rpf = cast<float>(r_prev);
  OpOut<float> shared = alloc_run<float>(k);
  RouterActs<float> a = shared.acts();
  a.u2_TR = a.u1_TR;
  a.g2_TR = a.g1_TR;
  router_forward<float>(rw, products, k.shape(), xf.data(), rpf.data(), bias.data(), a, {}, true);
  EXPECT_EQ(base.probs, shared.probs);
  EXPECT_EQ(base.g2, shared.g1);
}

// Products on a different storage (transposed weights), as the engine plugs in its own:
// the op must go through them and not read w's matrices.
class TransposedProducts final : public RouterProducts<double> {
 public:
  explicit TransposedProducts(const Params& p, int64_t D, int64_t R, int64_t N) {
    wt_[0] = transpose(p.down, R, D);
    wt_[1] = transpose(p.mlp0, R, R);
    wt_[2] = transpose(p.mlp2, R, R);
    wt_[3] = transpose(p.mlp4, N, R);
  }
  void apply(RouterMatrix m, double* y, const double* x, int64_t tokens, int64_t in, int64_t out) override {
    const Vec& w_IO = wt_[int(m)];
    ASSERT_EQ(int64_t(w_IO.size()), in * out);
    calls.push_back({int(m), in, out});
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < in; ++i) s += x[t * in + i] * w_IO[i * out + o];
        y[t * out + o] = s;
      }
  }
  std::vector<std::vector<int64_t>> calls;

 private:
  static Vec transpose(const Vec& w, int64_t rows, int64_t cols) {
    Vec out(w.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = w[r * cols + c];
    return out;
  }
  Vec wt_[4];
};

TEST(Router, ProductsArePluggable) {
  Case k = cases()[1];
  Params p = random_params(k, 10);
  const Vec x = random_vector(k.T * k.D, 20), r_prev = random_vector(k.T * k.R, 30);
  const std::vector<float> bias = zero_bias(k);
  const std::vector<Vec> vectors_only{Vec(), p.down_b, p.scale, p.norm, Vec(), p.mlp0_b, Vec(), p.mlp2_b, Vec()};
  const RouterWeights<double> rw = view<double>(vectors_only.data());  // no matrices at all
  TransposedProducts products(p, k.D, k.R, k.N);
  OpOut<double> o = alloc_run<double>(k);
  RouterActs<double> a = o.acts();
  router_forward<double>(rw, products, k.shape(), x.data(), r_prev.data(), bias.data(), a);
  expect_matches_reference(reference(k, p, x, &r_prev, bias, 0, 0), o, 1e-12);
  const std::vector<std::vector<int64_t>> want{{0, k.D, k.R}, {1, k.R, k.R}, {2, k.R, k.R}, {3, k.R, k.N}};
  EXPECT_EQ(products.calls, want);
}

RouterGrads<double> grad_view(std::vector<Vec>& g) {
  auto ptr = [&](int i) -> double* { return g[i].empty() ? nullptr : g[i].data(); };
  return {ptr(0), ptr(1), ptr(2), ptr(3), ptr(4), ptr(5), ptr(6), ptr(7), ptr(8)};
}

struct Scratch {
  Vec dprobs, dlogits, dg2, du2, dg1, du1, drn, dr;
  explicit Scratch(const Case& k)
      : dprobs(k.T * k.N, 9.0),
        dlogits(k.T * k.N, 9.0),
        dg2(k.T * k.R, 9.0),
        du2(k.T * k.R, 9.0),
        dg1(k.T * k.R, 9.0),
        du1(k.T * k.R, 9.0),
        drn(k.T * k.R, 9.0),
        dr(k.T * k.R, 9.0) {}
  RouterScratch<double> view() {
    return {dprobs.data(), dlogits.data(), dg2.data(), du2.data(), dg1.data(), du1.data(), drn.data(), dr.data()};
  }
};

// The backward of `o` for the loss value() = <gate, pgate> + <r, pr> (r goes on to the next layer) +
// grad_scale * (aux + z), its x and weight gradients checked against finite differences of value(); dr_prev starts
// at 7 (it is written, not added into).
struct RouterGradients {
  std::vector<Vec> g;
  Vec dx, dr_prev;
};

template <typename Value>
RouterGradients check_router_gradients(const Case& k, Params& p, Vec& x, const Vec* rp, const Vec& pgate, const Vec& pr,
                                       OpOut<double>& o, const RouterLossOptions& loss, Value value) {
  const char* names[9] = {"down", "down bias", "EDA scale", "norm", "mlp0", "mlp0 bias", "mlp2", "mlp2 bias", "mlp4"};
  const std::vector<Vec> w = cast_all<double>(p);
  RouterGradients out;
  for (Vec* v : p.all()) out.g.emplace_back(v->size(), 0.0);
  out.dx.assign(k.T * k.D, 0.0);
  out.dr_prev.assign(k.T * k.R, 7.0);
  Scratch scratch(k);
  RouterScratch<double> sv = scratch.view();
  router_backward<double>(Precision{}, view<double>(w.data()), grad_view(out.g), k.shape(), o.acts(), sv, x.data(),
                          rp != nullptr ? rp->data() : nullptr, pgate.data(), pr.data(), out.dx.data(),
                          out.dr_prev.data(), loss);
  testing::expect_gradient("x", x, out.dx, value);
  std::vector<Vec*> params = p.all();
  for (int i = 0; i < 9; ++i)
    if (!params[i]->empty()) testing::expect_gradient(names[i], *params[i], out.g[i], value);
  return out;
}

TEST(Router, GradientsMatchFiniteDifferences) {
  const RouterLossOptions loss{0.3, 0.02, 0.5};
  for (const Case& k : cases()) {
    SCOPED_TRACE(::testing::Message() << "eda " << k.eda << " skip " << k.skip << " K " << k.K);
    Params p = random_params(k, 10);
    Vec x = random_vector(k.T * k.D, 20), r_prev = random_vector(k.T * k.R, 30);
    Vec* rp = k.eda ? &r_prev : nullptr;
    const Vec pgate = random_vector(k.T * k.K, 40), pr = random_vector(k.T * k.R, 50);
    const std::vector<float> bias = zero_bias(k);
    ASSERT_GT(reference(k, p, x, rp, bias, 0, 0).margin, 1e-3) << "perturbations must not cross a tie";
    // loss = <gate, pgate> + <r, pr> (r goes on to the next layer) + grad_scale * (aux + z).
    auto value = [&] {
      const OpOut<double> o = run_op<double>(k, p, x, rp, bias, loss);
      return dot(o.gate, pgate) + dot(o.r, pr) + loss.grad_scale * (o.losses.switch_aux + o.losses.z);
    };
    OpOut<double> o = run_op<double>(k, p, x, rp, bias, loss);
    const RouterGradients grads = check_router_gradients(k, p, x, rp, pgate, pr, o, loss, value);
    const Vec &dx = grads.dx, &dr_prev = grads.dr_prev;
    const std::vector<Vec>& g = grads.g;
    if (k.eda) {
      testing::expect_gradient("r_prev", r_prev, dr_prev, value);
    } else {
      EXPECT_EQ(dr_prev, Vec(k.T * k.R, 0.0)) << "without EDA nothing flows to a previous layer";
    }
    // Training passes one buffer as dr_next and dr_prev: the same result.
    const std::vector<Vec> w = cast_all<double>(p);
    Scratch scratch(k);
    RouterScratch<double> sv = scratch.view();
    Vec carry = pr, dx2(k.T * k.D, 0.0);
    std::vector<Vec> g2;
    for (Vec* v : p.all()) g2.emplace_back(v->size(), 0.0);
    router_backward<double>(Precision{}, view<double>(w.data()), grad_view(g2), k.shape(), o.acts(), sv, x.data(),
                            rp != nullptr ? rp->data() : nullptr, pgate.data(), carry.data(), dx2.data(), carry.data(),
                            loss);
    EXPECT_EQ(carry, dr_prev);
    EXPECT_EQ(dx2, dx);
    EXPECT_EQ(g2, g);
  }
}

// Routing replay (ops/routing.h): forcing the router's own choices changes no
// bit; forcing others routes by them with the gate p[forced slot], whose
// gradient (and the losses', which see the forced choices) reaches every
// router weight: finite differences of the replayed loss.
TEST(Router, ReplayedRoutingGradientsMatchFiniteDifferences) {
  const RouterLossOptions loss{0.3, 0.02, 0.5};
  for (const Case& k : cases()) {
    SCOPED_TRACE(::testing::Message() << "eda " << k.eda << " skip " << k.skip << " K " << k.K);
    Params p = random_params(k, 10);
    Vec x = random_vector(k.T * k.D, 20), r_prev = random_vector(k.T * k.R, 30);
    Vec* rp = k.eda ? &r_prev : nullptr;
    const std::vector<float> bias = zero_bias(k);
    const OpOut<double> own = run_op<double>(k, p, x, rp, bias, loss);
    // The router's own choices: the same bits, no flip.
    RoutingReplay same{own.choice.data(), true};
    const OpOut<double> again = run_op<double>(k, p, x, rp, bias, loss, false, &same);
    EXPECT_EQ(again.choice, own.choice);
    EXPECT_EQ(again.gate, own.gate);
    EXPECT_EQ(again.probs, own.probs);
    EXPECT_EQ(again.losses.switch_aux, own.losses.switch_aux);
    EXPECT_EQ(same.compared, k.T);
    EXPECT_EQ(same.flips, 0);
    // Another record: each choice moved to the next slot, token 0 not recorded (its own choice stands).
    std::vector<int32_t> record = own.choice;
    for (int32_t& c : record)
      if (c >= 0) c = int32_t((c + 1) % k.N);
    std::fill(record.begin(), record.begin() + k.K, kNotRecorded);
    RoutingReplay counted{record.data(), false};
    const OpOut<double> unforced = run_op<double>(k, p, x, rp, bias, loss, false, &counted);
    EXPECT_EQ(unforced.choice, own.choice);
    EXPECT_EQ(counted.compared, k.T - 1);
    EXPECT_EQ(counted.flips, k.T - 1);
    EXPECT_EQ(counted.used_flips, k.T - 1);
    RoutingReplay forced{record.data(), true};
    OpOut<double> o = run_op<double>(k, p, x, rp, bias, loss, false, &forced);
    EXPECT_EQ(forced.flips, k.T - 1);
    EXPECT_EQ(forced.used_flips, 0);
    for (int64_t i = 0; i < k.T * k.K; ++i) {
      const int32_t want = i < k.K ? own.choice[i] : record[i];
      EXPECT_EQ(o.choice[i], want) << i;
      EXPECT_EQ(o.gate[i], want == kNoExpert ? 0.0 : o.probs[(i / k.K) * k.N + want]) << i;
    }
    ASSERT_GT(reference(k, p, x, rp, bias, 0, 0).margin, 1e-3) << "perturbations must not cross a tie at token 0";
    const Vec pgate = random_vector(k.T * k.K, 40), pr = random_vector(k.T * k.R, 50);
    auto value = [&] {
      RoutingReplay f{record.data(), true};
      const OpOut<double> v = run_op<double>(k, p, x, rp, bias, loss, false, &f);
      return dot(v.gate, pgate) + dot(v.r, pr) + loss.grad_scale * (v.losses.switch_aux + v.losses.z);
    };
    check_router_gradients(k, p, x, rp, pgate, pr, o, loss, value);
  }
}

// A trained branch beside each product (what LoRA adds, model/moe_block.cc):
// y += x V_m^T, added by the products in the forward and differentiated
// through RouterBranches in the backward.
class LinearBranches final : public RouterProducts<double>, public RouterBranches<double> {
 public:
  LinearBranches(const RouterWeights<double>& w, const std::vector<Vec>& v, std::vector<Vec>* g)
      : arrays_(Precision{}, w), v_(v), g_(g) {}
  void apply(RouterMatrix m, double* y_TO, const double* x_TI, int64_t tokens, int64_t in, int64_t out) override {
    arrays_.apply(m, y_TO, x_TI, tokens, in, out);
    linear_forward<double>(y_TO, x_TI, v_[size_t(m)].data(), tokens, in, out, true);
  }
  void backward(RouterMatrix m, double* dx_TI, const double* dy_TO, const double* x_TI, int64_t tokens, int64_t in,
                int64_t out) override {
    linear_backward<double>(dx_TI, (*g_)[size_t(m)].data(), dy_TO, x_TI, v_[size_t(m)].data(), tokens, in, out);
  }

 private:
  RouterArrayProducts<double> arrays_;
  const std::vector<Vec>& v_;
  std::vector<Vec>* g_;
};

TEST(Router, BranchesGetTheirGradientsThroughTheChain) {
  const Case k = cases()[1];  // EDA and a skip slot
  Params p = random_params(k, 10);
  Vec x = random_vector(k.T * k.D, 20), r_prev = random_vector(k.T * k.R, 30);
  const Vec pgate = random_vector(k.T * k.K, 40), pr = random_vector(k.T * k.R, 50);
  const std::vector<float> bias = zero_bias(k);
  const int64_t sizes[4] = {k.R * k.D, k.R * k.R, k.R * k.R, k.N * k.R};
  std::vector<Vec> v;
  for (int m = 0; m < 4; ++m) v.push_back(random_vector(sizes[m], 60 + uint64_t(m), 0.3));
  const std::vector<Vec> w = cast_all<double>(p);
  auto run = [&](std::vector<Vec>* g, OpOut<double>& o) {
    LinearBranches products(view<double>(w.data()), v, g);
    RouterActs<double> a = o.acts();
    router_forward<double>(view<double>(w.data()), products, k.shape(), x.data(), r_prev.data(), bias.data(), a);
    return dot(o.gate, pgate) + dot(o.r, pr);
  };
  auto value = [&] {
    OpOut<double> o = alloc_run<double>(k);
    return run(nullptr, o);
  };
  std::vector<Vec> gv;
  for (int m = 0; m < 4; ++m) gv.emplace_back(sizes[m], 0.0);
  OpOut<double> o = alloc_run<double>(k);
  run(&gv, o);
  LinearBranches branches(view<double>(w.data()), v, &gv);
  std::vector<Vec> g;
  for (Vec* q : p.all()) g.emplace_back(q->size(), 0.0);
  Vec dx(k.T * k.D, 0.0), dr_prev(k.T * k.R, 0.0);
  Scratch scratch(k);
  RouterScratch<double> sv = scratch.view();
  router_backward<double>(Precision{}, view<double>(w.data()), grad_view(g), k.shape(), o.acts(), sv, x.data(),
                          r_prev.data(), pgate.data(), pr.data(), dx.data(), dr_prev.data(), {}, &branches);
  const char* names[4] = {"down branch", "mlp0 branch", "mlp2 branch", "mlp4 branch"};
  for (int m = 0; m < 4; ++m) testing::expect_gradient(names[m], v[size_t(m)], gv[size_t(m)], value);
  testing::expect_gradient("x", x, dx, value);
  testing::expect_gradient("r_prev", r_prev, dr_prev, value);
}

}  // namespace
}  // namespace zaya
