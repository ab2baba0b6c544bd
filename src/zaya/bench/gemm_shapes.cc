#include "zaya/bench/gemm_shapes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "zaya/core/error.h"

namespace zaya {

std::string GemmShape::layout() const { return std::string(trans_a ? "t" : "n") + (trans_b ? "t" : "n"); }

void parse_gemm_layout(const std::string& text, bool& trans_a, bool& trans_b) {
  std::string t;
  for (char c : text) t += char(std::tolower(static_cast<unsigned char>(c)));
  ZAYA_CHECK(t.size() == 2 && (t[0] == 'n' || t[0] == 't') && (t[1] == 'n' || t[1] == 't'),
             "GEMM layout '{}' is invalid; allowed: nn, nt, tn, tt (op(A) op(B), t = transposed)", text);
  trans_a = t[0] == 't';
  trans_b = t[1] == 't';
}

namespace {

int64_t parse_dim(const std::string& s, const std::string& what) {
  std::string t = s;
  int64_t scale = 1;
  if (!t.empty() && (t.back() == 'k' || t.back() == 'K')) {
    scale = 1024;
    t.pop_back();
  }
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  ZAYA_CHECK(!t.empty() && end != t.c_str() && *end == '\0' && v >= 1 && v <= (int64_t(1) << 31) / scale,
             "{}: '{}' is not a positive dimension (e.g. 512, 4K)", what, s);
  return int64_t(v) * scale;
}

}  // namespace

std::vector<int64_t> parse_dim_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(), [](unsigned char c) { return std::isspace(c); }), item.end());
    if (item.empty()) continue;
    const size_t c1 = item.find(':');
    if (c1 == std::string::npos) {
      out.push_back(parse_dim(item, what));
      continue;
    }
    const size_t c2 = item.find(':', c1 + 1);
    const int64_t lo = parse_dim(item.substr(0, c1), what);
    const int64_t hi = parse_dim(item.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1), what);
    ZAYA_CHECK(lo <= hi, "{}: range '{}' runs backwards", what, item);
    char op = '*';
    int64_t step = 2;
    if (c2 != std::string::npos) {
      const std::string s = item.substr(c2 + 1);
      ZAYA_CHECK(s.size() >= 2 && (s[0] == '*' || s[0] == '+' || s[0] == 'x'),
                 "{}: step '{}' of '{}' must be *F (multiply) or +S (add)", what, s, item);
      op = s[0] == '+' ? '+' : '*';
      step = parse_dim(s.substr(1), what);
      ZAYA_CHECK(op == '+' || step >= 2, "{}: a multiplicative step must be at least 2 in '{}'", what, item);
    }
    for (int64_t v = lo; v <= hi; v = op == '+' ? v + step : v * step) {
      out.push_back(v);
      ZAYA_CHECK(out.size() <= 4096, "{}: '{}' expands to more than 4096 values", what, text);
    }
  }
  ZAYA_CHECK(!out.empty(), "{}: no dimensions in '{}'", what, text);
  return out;
}

GemmShape parse_gemm_shape(const std::string& text, const std::string& what) {
  int64_t v[3] = {0, 0, 0};
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t x = i < 2 ? text.find('x', pos) : std::string::npos;
    ZAYA_CHECK(i == 2 || x != std::string::npos, "{} '{}' must be MxNxK, e.g. 2048x4096x1024", what, text);
    v[i] = parse_dim_list(text.substr(pos, x == std::string::npos ? std::string::npos : x - pos), what).front();
    pos = x + 1;
  }
  return {v[0], v[1], v[2], false, false};
}

int64_t expected_expert_tokens(const ZayaConfig& c, const ModelGemmOptions& o) {
  if (o.expert_tokens > 0) return o.expert_tokens;
  const double t =
      double(o.micro_batch * o.seq_len) * double(o.ep) * double(c.top_k) * (1.0 - o.skip_fraction) / double(c.experts);
  return std::max<int64_t>(1, int64_t(std::llround(t)));
}

std::vector<ModelGemm> model_gemms(const ZayaConfig& c, const ModelGemmOptions& o) {
  ZAYA_CHECK(o.micro_batch >= 1 && o.seq_len >= 1, "micro-batch and sequence length must be positive");
  ZAYA_CHECK(o.ep >= 1 && c.experts % o.ep == 0, "{} experts cannot be split over an expert-parallel size of {}",
             c.experts, o.ep);
  ZAYA_CHECK(o.skip_fraction >= 0 && o.skip_fraction < 1, "the skip fraction must be in [0, 1), got {}",
             o.skip_fraction);
  const int64_t B = o.micro_batch, S = o.seq_len, T = B * S, D = c.hidden, Q = c.q_width(), KV = c.kv_width();
  const int64_t P = Q + 2 * KV, C = c.conv_channels(), d = c.head_dim, G = C / d, R = c.router_hidden;
  const int64_t N = c.router_slots(), F = c.expert_ffn, V = c.vocab_size, L = c.num_blocks;
  const int64_t te = expected_expert_tokens(c, o), experts_here = c.experts / o.ep;
  std::vector<ModelGemm> out;
  auto add = [&](std::string name, std::string phase, int64_t m, int64_t n, int64_t k, bool ta, bool tb, double count,
                 bool approx = false) {
    out.push_back({std::move(name), std::move(phase), {m, n, k, ta, tb}, count, approx});
  };
  // nn.Linear y = x W^T over `rows` rows: forward nt, input gradient nn, weight gradient tn.
  auto linear = [&](const std::string& name, int64_t rows, int64_t in, int64_t outw, double count) {
    add(name, "fwd", rows, outw, in, false, true, count);
    add(name, "bwd.dx", rows, in, outw, false, false, count);
    add(name, "bwd.dw", outw, in, rows, true, false, count);
  };
  const double layers = double(L);
  // CCA attention half-layers.
  linear("attn.qkv_proj", T, D, P, layers);
  linear("attn.o_proj", T, Q, D, layers);
  // Grouped convolution: k1 = cca_time1 taps per (sequence, head group), d x d each.
  const double conv = layers * double(B) * double(G) * double(c.conv_kernel1);
  add("attn.conv_qk.1", "fwd", S, d, d, false, true, conv);
  add("attn.conv_qk.1", "bwd.dx", S, d, d, false, false, conv);
  add("attn.conv_qk.1", "bwd.dw", d, d, S, true, false, conv);
  // Causal attention in query blocks of 64: block j sees (j + 1) * 64 keys; the mean is used. On a sliding
  // block of window W (spec §12) query i sees min(W, i + 1) keys, so block j computes min((j + 1) * 64, W + 63):
  // those blocks get rows of their own, named "....sliding".
  const int64_t qb = std::min<int64_t>(64, S), blocks = (S + qb - 1) / qb;
  const double sliding = c.has_sliding() ? double(c.sliding_blocks.size()) : 0.0;
  auto attention = [&](const std::string& suffix, int64_t keys, double blocks_of_kind) {
    const double heads = blocks_of_kind * double(B) * double(c.q_heads) * double(blocks);
    if (heads <= 0) return;
    add("attn.scores" + suffix, "fwd", qb, keys, d, false, true, heads, true);
    add("attn.values" + suffix, "fwd", qb, d, keys, false, false, heads, true);
    add("attn.scores" + suffix, "bwd.recompute", qb, keys, d, false, true, heads, true);
    add("attn.dprobs" + suffix, "bwd.dx", qb, keys, d, false, true, heads, true);
    add("attn.dq" + suffix, "bwd.dx", qb, d, keys, false, false, heads, true);
    add("attn.dk" + suffix, "bwd.dw", keys, d, qb, true, false, heads, true);
    add("attn.dv" + suffix, "bwd.dw", keys, d, qb, true, false, heads, true);
  };
  attention("", std::max<int64_t>(1, (S + qb) / 2), layers - sliding);
  if (sliding > 0) {
    double sum = 0;
    for (int64_t j = 0; j < blocks; ++j) sum += double(std::min((j + 1) * qb, c.sliding_window + qb - 1));
    attention(".sliding", std::max<int64_t>(1, int64_t(sum / double(blocks) + 0.5)), sliding);
  }
  // MoE half-layers: the router MLP, then the experts at their expected rows.
  linear("moe.router.down_proj", T, D, R, layers);
  linear("moe.router.mlp0", T, R, R, layers);
  linear("moe.router.mlp2", T, R, R, layers);
  linear("moe.router.mlp4", T, R, N, layers);
  const double experts = layers * double(experts_here);
  linear("moe.expert.fc1", te, D, 2 * F, experts);
  linear("moe.expert.fc2", te, F, D, experts);
  // Tied embedding as the LM head.
  linear("lm_head", T, D, V, 1);
  return out;
}

}  // namespace zaya
