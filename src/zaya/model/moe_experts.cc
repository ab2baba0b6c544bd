#include "zaya/model/moe_experts.h"

#include <cstring>

#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/timer.h"
#include "zaya/core/zero_fill.h"
#include "zaya/model/lora_branch.h"
#include "zaya/ops/activations.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/matmul.h"

namespace zaya {
namespace {

bool distributed(const Comm* ep) { return ep != nullptr && ep->size() > 1; }

// Moves rows between source-major order (src, then expert) and expert-major
// order (expert, then src). counts_WE[s * E + e] rows per block.
void regroup(float* dst, const float* src, const ExpertExchange& x, int64_t width, bool to_expert_major) {
  const int64_t S = x.ranks, E = x.local_experts;
  int64_t source_major = 0;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t e = 0; e < E; ++e) {
      int64_t expert_major = x.expert_offsets[e];
      for (int64_t q = 0; q < s; ++q) expert_major += x.counts_WE[q * E + e];
      const int64_t n = x.counts_WE[s * E + e];
      const float* from = src + (to_expert_major ? source_major : expert_major) * width;
      float* to = dst + (to_expert_major ? expert_major : source_major) * width;
      std::memcpy(to, from, sizeof(float) * n * width);
      source_major += n;
    }
}

// all_to_all_v of rows `width` floats wide: send_rows[r] rows to rank r, recv_rows[r] from it.
void exchange_rows(Comm& ep, const float* send, const std::vector<int64_t>& send_rows, float* recv,
                   const std::vector<int64_t>& recv_rows, int64_t width, ExpertScratch& s) {
  const int64_t R = int64_t(send_rows.size());
  int64_t so = 0, ro = 0;
  for (int64_t r = 0; r < R; ++r) {
    s.counts_a[r] = send_rows[r] * width;
    s.displs_a[r] = so;
    so += s.counts_a[r];
    s.counts_b[r] = recv_rows[r] * width;
    s.displs_b[r] = ro;
    ro += s.counts_b[r];
  }
  ZAYA_PROFILE_SCOPE("moe.all_to_all_v");
  const double t0 = now_seconds();
  ep.all_to_all_v(send, s.counts_a.data(), s.displs_a.data(), recv, s.counts_b.data(), s.displs_b.data(), DType::kF32);
  s.exchange_seconds += now_seconds() - t0;
}

}  // namespace

void carve_expert_acts(ExpertActs& a, const ZayaConfig& c, int64_t T, int64_t ep_ranks, bool keep_bf16, Arena& arena) {
  const int64_t X = expert_row_capacity(c, T, ep_ranks), D = c.hidden, F = c.expert_ffn;
  const int64_t local = c.experts / ep_ranks;
  a.keep_bf16 = keep_bf16;
  if (keep_bf16) {
    // Each expert's rows padded to a whole bucket: at most kBf16RowBucket - 1 more rows per expert.
    const int64_t padded = X + local * kBf16RowBucket;
    a.xe_bf16 = arena.carve_bf16(padded * D);
    a.act_bf16 = arena.carve_bf16(padded * F);
    a.bf16_offsets.assign(local + 1, 0);
  } else {
    a.xe_XD = arena.carve(X * D);
    a.act_XF = arena.carve(X * F);
  }
  a.h_X2F = arena.carve(X * 2 * F);
  a.y_MD = arena.carve(T * c.top_k * D);
  a.exchange.ranks = ep_ranks;
  a.exchange.local_experts = local;
  a.exchange.counts_WE.assign(ep_ranks * local, 0);
  a.exchange.send_rows.assign(ep_ranks, 0);
  a.exchange.recv_rows.assign(ep_ranks, 0);
  a.exchange.expert_offsets.assign(local + 1, 0);
}

void carve_expert_scratch(ExpertScratch& s, const ZayaConfig& c, int64_t T, int64_t ep_ranks, bool keep_bf16,
                          Arena& arena) {
  const int64_t X = expert_row_capacity(c, T, ep_ranks), D = c.hidden, F = c.expert_ffn;
  s.send_MD = arena.carve(T * c.top_k * D);
  s.recv_XD = arena.carve(X * D);  // every exchange moves D-wide rows (inputs, outputs, their gradients)
  s.ye_XD = arena.carve(X * D);
  s.dact_XF = arena.carve(X * F);
  s.dh_X2F = arena.carve(X * 2 * F);
  if (keep_bf16) {
    s.xe_XD = arena.carve(X * D);
    s.act_XF = arena.carve(X * F);
  }
  for (auto* v : {&s.counts_a, &s.displs_a, &s.counts_b, &s.displs_b}) v->assign(ep_ranks, 0);
  s.plan_counts_E.assign(c.experts, 0);
}

void experts_forward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const ExpertPlan& plan,
                     const float* x_TD, ExpertActs& a, ExpertScratch& s, Comm* ep, const BlockLora* lora) {
  const int64_t D = c.hidden, F = c.expert_ffn, El = w.expert_count;
  ExpertExchange& x = a.exchange;
  const bool lora_up = lora != nullptr && lora->has(LoraTarget::kExpertGateUp);
  const bool lora_down = lora != nullptr && lora->has(LoraTarget::kExpertDown);
  ZAYA_CHECK(!a.keep_bf16 || !(lora_up || lora_down),
             "internal error: expert LoRA targets need the experts' inputs in float32");
  // The float32 GEMM inputs: kept, or for this forward only.
  float* xe = a.keep_bf16 ? s.xe_XD : a.xe_XD;
  float* act = a.keep_bf16 ? s.act_XF : a.act_XF;
  if (!distributed(ep)) {
    // One rank: plan order is expert-major already.
    for (int64_t e = 0; e < El; ++e) x.counts_WE[e] = plan.count(e);
    x.send_rows[0] = x.recv_rows[0] = plan.rows;
    gather_rows<float>(xe, x_TD, plan, D);
  } else {
    const int64_t R = ep->size();
    // Rows per global expert, laid out by destination rank (experts r*El .. r*El+El-1
    // live on rank r): exactly all_to_all's send layout. Each rank learns how
    // many rows every source sends to each of its experts.
    for (int64_t e = 0; e < c.experts; ++e) s.plan_counts_E[e] = plan.count(e);
    ep->all_to_all(s.plan_counts_E.data(), x.counts_WE.data(), size_t(El), DType::kI64);
    for (int64_t r = 0; r < R; ++r) {
      int64_t sent = 0, received = 0;
      for (int64_t e = 0; e < El; ++e) {
        sent += s.plan_counts_E[r * El + e];
        received += x.counts_WE[r * El + e];
      }
      x.send_rows[r] = sent;
      x.recv_rows[r] = received;
    }
    gather_rows<float>(s.send_MD, x_TD, plan, D);
  }
  // Expert-major offsets.
  x.expert_offsets[0] = 0;
  for (int64_t e = 0; e < El; ++e) {
    int64_t n = 0;
    for (int64_t r = 0; r < x.ranks; ++r) n += x.counts_WE[r * El + e];
    x.expert_offsets[e + 1] = x.expert_offsets[e] + n;
  }
  x.rows = x.expert_offsets[El];
  for (int64_t e = 0; a.keep_bf16 && e < El; ++e)
    a.bf16_offsets[e + 1] = a.bf16_offsets[e] + bf16_padded_rows(x.expert_offsets[e + 1] - x.expert_offsets[e]);
  if (distributed(ep)) {
    exchange_rows(*ep, s.send_MD, x.send_rows, s.recv_XD, x.recv_rows, D, s);
    regroup(xe, s.recv_XD, x, D, true);
  }
  // One GEMM pair per local expert (and its adapters' branches, on the same rows).
  for (int64_t e = 0; e < El; ++e) {
    const int64_t r0 = x.expert_offsets[e], n = x.expert_offsets[e + 1] - r0;
    if (n == 0) continue;
    if (a.keep_bf16) {
      linear_forward_bf16_keep(*precision.bf16, a.h_X2F + r0 * 2 * F, xe + r0 * D, a.xe_bf16 + a.bf16_offsets[e] * D,
                               precision.bf16->required_copy_of(w.fc1_E2FD + e * 2 * F * D), n, D, 2 * F, false);
      continue;
    }
    adapted_linear_forward(
        precision, a.h_X2F + r0 * 2 * F, xe + r0 * D, w.fc1_E2FD + e * 2 * F * D, n, D, 2 * F,
        lora_expert_branch(c, lora, LoraTarget::kExpertGateUp, w.expert_first + e, r0, n, LoraPass::kForward));
  }
  swiglu_forward<float>(act, a.h_X2F, x.rows, F);
  float* ye = distributed(ep) ? s.ye_XD : a.y_MD;
  for (int64_t e = 0; e < El; ++e) {
    const int64_t r0 = x.expert_offsets[e], n = x.expert_offsets[e + 1] - r0;
    if (n == 0) continue;
    if (a.keep_bf16) {
      linear_forward_bf16_keep(*precision.bf16, ye + r0 * D, act + r0 * F, a.act_bf16 + a.bf16_offsets[e] * F,
                               precision.bf16->required_copy_of(w.fc2_EDF + e * D * F), n, F, D, false);
      continue;
    }
    adapted_linear_forward(
        precision, ye + r0 * D, act + r0 * F, w.fc2_EDF + e * D * F, n, F, D,
        lora_expert_branch(c, lora, LoraTarget::kExpertDown, w.expert_first + e, r0, n, LoraPass::kForward));
  }
  if (distributed(ep)) {
    regroup(s.recv_XD, s.ye_XD, x, D, false);
    exchange_rows(*ep, s.recv_XD, x.recv_rows, a.y_MD, x.send_rows, D, s);
  }
}

void experts_backward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const MoeWeights& g,
                      const ExpertActs& a, ExpertScratch& s, Comm* ep, const float* dy_MD, float* dxp_MD,
                      const BlockLora* lora) {
  const int64_t D = c.hidden, F = c.expert_ffn, El = w.expert_count;
  const ExpertExchange& x = a.exchange;
  // Gradient of the expert outputs, expert-major.
  const float* dye = dy_MD;
  if (distributed(ep)) {
    exchange_rows(*ep, dy_MD, x.send_rows, s.recv_XD, x.recv_rows, D, s);
    regroup(s.ye_XD, s.recv_XD, x, D, true);
    dye = s.ye_XD;
  }
  for (int64_t e = 0; e < El; ++e) {
    const int64_t r0 = x.expert_offsets[e], n = x.expert_offsets[e + 1] - r0;
    if (n == 0) continue;
    zero_fill(s.dact_XF + r0 * F, n * F);
    if (a.keep_bf16) {
      linear_backward_bf16_kept(
          *precision.bf16, s.dact_XF + r0 * F, g.fc2_EDF != nullptr ? g.fc2_EDF + e * D * F : nullptr, dye + r0 * D,
          a.act_bf16 + a.bf16_offsets[e] * F, precision.bf16->required_copy_of(w.fc2_EDF + e * D * F), n, F, D);
      continue;
    }
    adapted_linear_backward(
        precision, s.dact_XF + r0 * F, g.fc2_EDF != nullptr ? g.fc2_EDF + e * D * F : nullptr, dye + r0 * D,
        a.act_XF + r0 * F, w.fc2_EDF + e * D * F, n, F, D,
        lora_expert_branch(c, lora, LoraTarget::kExpertDown, w.expert_first + e, r0, n, LoraPass::kBackward));
  }
  zero_fill(s.dh_X2F, x.rows * 2 * F);
  swiglu_backward<float>(s.dh_X2F, s.dact_XF, a.h_X2F, x.rows, F);
  float* dxe = distributed(ep) ? s.ye_XD : dxp_MD;
  for (int64_t e = 0; e < El; ++e) {
    const int64_t r0 = x.expert_offsets[e], n = x.expert_offsets[e + 1] - r0;
    if (n == 0) continue;
    zero_fill(dxe + r0 * D, n * D);
    if (a.keep_bf16) {
      linear_backward_bf16_kept(*precision.bf16, dxe + r0 * D,
                                g.fc1_E2FD != nullptr ? g.fc1_E2FD + e * 2 * F * D : nullptr, s.dh_X2F + r0 * 2 * F,
                                a.xe_bf16 + a.bf16_offsets[e] * D,
                                precision.bf16->required_copy_of(w.fc1_E2FD + e * 2 * F * D), n, D, 2 * F);
      continue;
    }
    adapted_linear_backward(
        precision, dxe + r0 * D, g.fc1_E2FD != nullptr ? g.fc1_E2FD + e * 2 * F * D : nullptr, s.dh_X2F + r0 * 2 * F,
        a.xe_XD + r0 * D, w.fc1_E2FD + e * 2 * F * D, n, D, 2 * F,
        lora_expert_branch(c, lora, LoraTarget::kExpertGateUp, w.expert_first + e, r0, n, LoraPass::kBackward));
  }
  if (distributed(ep)) {
    regroup(s.recv_XD, s.ye_XD, x, D, false);
    exchange_rows(*ep, s.recv_XD, x.recv_rows, dxp_MD, x.send_rows, D, s);
  }
}

}  // namespace zaya
