#pragma once
// The ZAYA1 router of one MoE half-layer (spec §4), forward and backward:
//
//   r      = x Wdown^T + bdown                    [T, R]
//   r     += s * r_prev                           EDA, when the layer has s and a previous MoE layer's r
//   rn     = RMSNorm(r) * w_norm                  (r itself is passed on to the next MoE layer)
//   g1     = GELU(rn W0^T + b0),  g2 = GELU(g1 W2^T + b2)
//   logits = g2 W4^T                              [T, N], N = E experts + skip slot
//   p      = softmax(logits)
//   choice = biased top-k of p + balancing_bias,  gate = p[choice]  (ops/routing.h)
//
// Training and the cached inference engine both run this one chain, so an
// architecture change is made here once. Only the four matrix products differ
// between them (float arrays here, bf16/f32 matrices through the engine's
// LinearRunner there): they go through RouterProducts.
//
// The optional balancing losses (Switch aux on p, z-loss on the logits) are
// part of the op because their gradients enter the chain in its middle.

#include <cstdint>

#include "zaya/ops/precision.h"
#include "zaya/ops/routing.h"

namespace zaya {

// The router's tensors in PyTorch layouts; P = const T for weights, T for their gradients.
template <typename P>
struct RouterParams {
  P* down_RD = nullptr;  // router down_proj [R, D]
  P* down_b_R = nullptr;
  P* states_scale_R = nullptr;  // EDA scale s [R]; null: no EDA on this layer (the first MoE layer)
  P* norm_R = nullptr;          // rmsnorm_eda weight [R]
  P* mlp0_RR = nullptr;
  P* mlp0_b_R = nullptr;
  P* mlp2_RR = nullptr;
  P* mlp2_b_R = nullptr;
  P* mlp4_NR = nullptr;  // logits, no bias
};
template <typename T>
using RouterWeights = RouterParams<const T>;
template <typename T>
using RouterGrads = RouterParams<T>;

struct RouterShape {
  int64_t tokens = 0;      // T
  int64_t hidden = 0;      // D, the model width
  int64_t width = 0;       // R, router_hidden
  int64_t slots = 0;       // N, experts plus the skip slot if there is one
  int64_t top_k = 1;       // J, choices per token
  int64_t skip_slot = -1;  // index of the skip slot, -1 if none
  double norm_eps = 0;     // of the RMSNorm, in the working precision T
};

struct RouterLossOptions {
  double switch_aux_coeff = 0;  // 0: off
  double z_loss_coeff = 0;      // 0: off
  double grad_scale = 1;        // backward: multiplies both losses' gradients
};

// The values of the enabled balancing losses.
struct RouterLosses {
  double switch_aux = 0;
  double z = 0;
};

// What the forward writes and the backward reads, all [T, *] row-major. For a
// forward alone (inference) u2 may alias u1 and g2 alias g1.
template <typename T>
struct RouterActs {
  T* r_TR = nullptr;    // after EDA, before the norm: the next MoE layer's r_prev
  T* rstd_T = nullptr;  // 1 / rms of r
  T* rn_TR = nullptr;   // normed
  T* u1_TR = nullptr;   // pre-GELU of router_mlp.0
  T* g1_TR = nullptr;   //
  T* u2_TR = nullptr;   // pre-GELU of router_mlp.2
  T* g2_TR = nullptr;   //
  T* logits_TN = nullptr;
  T* probs_TN = nullptr;
  T* gate_TJ = nullptr;          // p[choice] (0 for a void choice)
  int32_t* choice_TJ = nullptr;  // slot or kNoExpert
};

// Backward scratch, [T, *] each.
template <typename T>
struct RouterScratch {
  T* dprobs_TN = nullptr;
  T* dlogits_TN = nullptr;
  T* dg2_TR = nullptr;
  T* du2_TR = nullptr;
  T* dg1_TR = nullptr;
  T* du1_TR = nullptr;
  T* drn_TR = nullptr;
  T* dr_TR = nullptr;
};

enum class RouterMatrix { kDown, kMlp0, kMlp2, kMlp4 };

// The four products y_TO = x_TI W^T of the forward (in, out: D -> R, R -> R, R -> R, R -> N).
template <typename T>
class RouterProducts {
 public:
  virtual void apply(RouterMatrix m, T* y_TO, const T* x_TI, int64_t tokens, int64_t in, int64_t out) = 0;

 protected:
  ~RouterProducts() = default;
};

// The products as linear_forward on the arrays of w in `precision` (training and tests).
template <typename T>
class RouterArrayProducts final : public RouterProducts<T> {
 public:
  RouterArrayProducts(const Precision& precision, const RouterWeights<T>& w) : precision_(precision), w_(w) {}
  void apply(RouterMatrix m, T* y_TO, const T* x_TI, int64_t tokens, int64_t in, int64_t out) override;

 private:
  Precision precision_;
  RouterWeights<T> w_;
};

// Extra trained branches beside the four products (LoRA adapters,
// model/moe_block.cc). Their forward goes through RouterProducts (the
// products' owner adds them); router_backward calls backward() right after
// each product's own backward, to add the branch's input gradient into dx_TI
// (and its parameters' gradients wherever it keeps them). dy_TO and x_TI are
// the product's output gradient and input.
template <typename T>
class RouterBranches {
 public:
  virtual void backward(RouterMatrix m, T* dx_TI, const T* dy_TO, const T* x_TI, int64_t tokens, int64_t in,
                        int64_t out) = 0;

 protected:
  ~RouterBranches() = default;
};

// Fills a (see RouterActs). r_prev_TR: the previous MoE layer's a.r_TR, or
// null (first MoE layer, or EDA off); EDA runs when it and w.states_scale_R
// are both given. The products go through `products`; w's matrices are not
// read. serial: run the element-wise steps on the calling thread (small
// inference steps, see ops/serial_if.h). replay: the recorded choices
// checked against the selection and, with replay->force, routed by
// (ops/routing.h, replay_routing) before the losses; null: none. Returns the
// enabled losses' values.
template <typename T>
RouterLosses router_forward(const RouterWeights<T>& w, RouterProducts<T>& products, const RouterShape& shape,
                            const T* x_TD, const T* r_prev_TR, const float* balancing_bias_N, RouterActs<T>& a,
                            const RouterLossOptions& loss = {}, bool serial = false, RoutingReplay* replay = nullptr);

// Given dgate_TJ (the gates' gradient) and dr_next_TR (the gradient of a.r_TR
// through the next MoE layer's EDA; null: none), adds into dx_TD and into
// every gradient of g (states_scale_R only when EDA ran), and writes into
// dr_prev_TR (if not null) the gradient of r_prev_TR, zeros when EDA did not
// run. dr_prev_TR may be dr_next_TR. branches: the products' extra branches
// (null: none). The products' backward runs in `precision`.
template <typename T>
void router_backward(const Precision& precision, const RouterWeights<T>& w, const RouterGrads<T>& g,
                     const RouterShape& shape, const RouterActs<T>& a, RouterScratch<T>& scratch, const T* x_TD,
                     const T* r_prev_TR, const T* dgate_TJ, const T* dr_next_TR, T* dx_TD, T* dr_prev_TR,
                     const RouterLossOptions& loss = {}, RouterBranches<T>* branches = nullptr);

}  // namespace zaya
