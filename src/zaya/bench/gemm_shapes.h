#pragma once
// GEMM shapes for `zaya bench gemm`: dimension lists and ranges from the
// command line, and every GEMM of a ZAYA1 model's forward and backward pass.
//
// A GEMM is C[M,N] = op(A)[M,K] * op(B)[K,N]; the layout names op(A) and op(B):
// "nn", "nt" (B transposed: nn.Linear's x W^T), "tn", "tt".

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/model/config.h"

namespace zaya {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;

  std::string layout() const;  // "nn", "nt", ...
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  bool operator==(const GemmShape&) const = default;
};

// Parses "nn", "nt", "tn", "tt" into the two transpose flags.
void parse_gemm_layout(const std::string& text, bool& trans_a, bool& trans_b);

// A dimension list: comma-separated values and ranges, with an optional K
// (x1024) suffix on values.
//   "512,1024,4096"   the values
//   "256:4096"        powers of two times the start: 256, 512, ..., 4096
//   "256:4096:*4"     multiply by 4 each step
//   "64:512:+64"      add 64 each step
std::vector<int64_t> parse_dim_list(const std::string& text, const std::string& what);

// "MxNxK" (each a value of parse_dim_list: "2Kx4096x1K"), untransposed; errors name `what`.
GemmShape parse_gemm_shape(const std::string& text, const std::string& what);

// One GEMM of the model.
struct ModelGemm {
  std::string name;   // e.g. "moe.expert.fc1"
  std::string phase;  // "fwd", "bwd.dx" (input gradient), "bwd.dw" (weight gradient)
  GemmShape shape;
  double count = 0;          // calls per micro-batch step
  bool approximate = false;  // attention blocks: shapes vary with the query block; the mean is used
};

struct ModelGemmOptions {
  int64_t micro_batch = 8;
  int64_t seq_len = 256;
  int64_t ep = 1;             // expert-parallel ranks (experts per rank = experts / ep)
  double skip_fraction = 0;   // share of routed choices that go to the skip expert
  int64_t expert_tokens = 0;  // rows per expert GEMM; 0: the expected value (below)
};

// Expected rows of one expert's GEMMs: the tokens of all ep ranks, top_k
// choices each, minus the skipped share, spread evenly over the experts:
//   T * ep * top_k * (1 - skip) / experts, rounded, at least 1.
int64_t expected_expert_tokens(const ZayaConfig& c, const ModelGemmOptions& o);

// Every GEMM of one micro-batch's forward and backward pass, following the
// calls in model/ (attention_block.cc, moe_block.cc, model.cc, ops/attention.cc,
// ops/cca_conv.cc, ops/router.cc): nn.Linear forward is "nt" (x W^T), its input gradient
// "nn" (dy W) and its weight gradient "tn" (dy^T x). Sliding-window blocks'
// attention GEMMs are rows of their own ("attn.scores.sliding", ...) whose key
// dimension is the mean over 64-query blocks of the keys a block computes:
// min((j + 1) x 64, W + 63) instead of (j + 1) x 64 (spec §12).
std::vector<ModelGemm> model_gemms(const ZayaConfig& c, const ModelGemmOptions& o);

}  // namespace zaya
