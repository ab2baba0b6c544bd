#include "zaya/plan/attention_window.h"

#include <algorithm>

#include "zaya/model/model.h"

namespace zaya {
namespace {

constexpr int64_t kQueryBlock = 64;  // bench/gemm_shapes.cc's attention query block

// Which dimension of an attention GEMM counts keys (-1: not an attention GEMM).
int key_dim(const std::string& name) {
  if (name == "attn.scores" || name == "attn.dprobs") return 1;  // n
  if (name == "attn.values" || name == "attn.dq") return 2;      // k
  if (name == "attn.dk" || name == "attn.dv") return 0;          // m
  return -1;
}

}  // namespace

double attended_keys(int64_t S, int64_t W) {
  const double s = double(S);
  if (W <= 0 || W >= S) return s * (s + 1) / 2;
  const double w = double(W);
  return w * (w + 1) / 2 + (s - w) * w;  // the first W queries fill the window, the rest see W each
}

double attention_forward_flops(const ZayaConfig& c, int64_t B, int64_t S) {
  double keys = 0;
  for (int64_t b = 0; b < c.num_blocks; ++b) keys += attended_keys(S, c.window_of(b));
  return double(B) * 4.0 * double(c.q_width()) * keys;
}

double windowed_forward_flops(const ZayaConfig& c, int64_t B, int64_t S, double routed_rows) {
  ZayaConfig full = c;
  full.sliding_window = 0;
  full.sliding_blocks.clear();
  return model_forward_flops(full, B, S, routed_rows) - attention_forward_flops(full, B, S) +
         attention_forward_flops(c, B, S);
}

std::vector<ModelGemm> windowed_model_gemms(const ZayaConfig& c, const ModelGemmOptions& o) {
  std::vector<ModelGemm> gemms = model_gemms(c, o);
  if (!c.has_sliding()) return gemms;
  const int64_t S = o.seq_len, W = c.sliding_window, qb = std::min(kQueryBlock, S), blocks = (S + qb - 1) / qb;
  double sum = 0;
  for (int64_t j = 0; j < blocks; ++j) sum += double(std::min((j + 1) * qb, W + qb - 1));
  const int64_t keys = std::max<int64_t>(1, int64_t(sum / double(blocks) + 0.5));
  const double share = double(c.sliding_blocks.size()) / double(c.num_blocks);
  std::vector<ModelGemm> out;
  for (ModelGemm& g : gemms) {
    const int dim = key_dim(g.name);
    if (dim < 0) {
      out.push_back(std::move(g));
      continue;
    }
    ModelGemm s = g;
    s.name += ".sliding";
    s.count = g.count * share;
    (dim == 0 ? s.shape.m : dim == 1 ? s.shape.n : s.shape.k) = keys;
    g.count *= 1 - share;
    if (g.count > 0) out.push_back(std::move(g));
    out.push_back(std::move(s));
  }
  return out;
}

double kv_cache_tokens(const ZayaConfig& c, int64_t context) {
  double tokens = 0;
  for (int64_t b = 0; b < c.num_blocks; ++b) {
    const int64_t W = c.window_of(b);
    tokens += double(W > 0 ? std::min(context, W - 1) : context);
  }
  return tokens;
}

double decode_attended_keys(const ZayaConfig& c, int64_t context) {
  double keys = 0;
  for (int64_t b = 0; b < c.num_blocks; ++b) {
    const int64_t W = c.window_of(b);
    keys += double(W > 0 ? std::min(context + 1, W) : context + 1);
  }
  return keys;
}

}  // namespace zaya
