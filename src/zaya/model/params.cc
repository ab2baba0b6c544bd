#include "zaya/model/params.h"

#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"

namespace zaya {

namespace {

// FNV-1a of the tensor name (stable across builds and platforms).
uint64_t name_stream(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

ParamTable::ParamTable(std::vector<ParamEntry> entries) : entries_(std::move(entries)) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const ParamEntry& e = entries_[i];
    ZAYA_ASSERT(e.offset >= total_);
    index_[e.name] = i;
    total_ = e.offset + e.numel;
  }
  dense_ = total_;
}

void ParamTable::add(const ZayaConfig& c, TensorRole role, int half_layer, int expert) {
  if (!tensor_present(role, half_layer, c)) return;
  const TensorDecl& d = tensor_decl(role);
  ParamEntry e;
  e.role = role;
  e.name = legacy_tensor_name(role, half_layer, expert);
  e.shape = tensor_shape(role, c);
  e.numel = 1;
  for (int64_t s : e.shape) e.numel *= s;
  e.offset = total_;  // packed: q/k/v rows and stacked experts stay contiguous for fused GEMMs
  e.kind = d.kind;
  e.init = d.init;
  e.init_std = tensor_init_std(role, c);
  e.half_layer = half_layer;
  e.expert = expert;
  e.weight_decay = d.kind == ParamKind::kMatrix || d.kind == ParamKind::kEmbedding;
  e.muon = d.kind == ParamKind::kMatrix;
  total_ += e.numel;
  index_[e.name] = entries_.size();
  entries_.push_back(std::move(e));
}

ParamTable::ParamTable(const ZayaConfig& c, bool trainable, ExpertRange experts) : experts_(experts) {
  if (experts_.count < 0) experts_ = {0, c.experts};
  ZAYA_CHECK(experts_.first >= 0 && experts_.count >= 1 && experts_.first + experts_.count <= c.experts,
             "expert range {}..{} does not fit {} experts", experts_.first, experts_.first + experts_.count - 1,
             c.experts);
  const std::span<const TensorDecl> decls = tensor_decls();
  // The rows of one scope in table order (buffers only in the buffer table).
  auto add_scope = [&](TensorScope scope, int n, TensorRole skip) {
    for (const TensorDecl& d : decls)
      if (d.scope == scope && d.role != skip && d.buffer != trainable) add(c, d.role, n);
  };
  if (!trainable) {
    for (int n = 1; n < c.half_layers(); n += 2) add_scope(TensorScope::kMoe, n, TensorRole::kMoeNorm);
    return;
  }
  add(c, TensorRole::kEmbedding, -1);
  // Each half-layer: its input norm, the residual merge at its input, then its block.
  for (int n = 0; n < c.half_layers(); ++n) {
    const bool attention = n % 2 == 0;
    const TensorRole norm = attention ? TensorRole::kAttnNorm : TensorRole::kMoeNorm;
    add(c, norm, n);
    add_scope(TensorScope::kMerge, n, norm);
    add_scope(attention ? TensorScope::kAttention : TensorScope::kMoe, n, norm);
  }
  add(c, TensorRole::kFinalNorm, -1);
  add_scope(TensorScope::kMerge, -1, TensorRole::kFinalNorm);
  add(c, TensorRole::kLmHead, -1);  // only when untied
  dense_ = total_;
  // Expert region: per MoE layer, this rank's experts' fc1 stacked [count, 2F, D], then fc2 [count, D, F].
  const int e0 = int(experts_.first), e1 = int(experts_.first + experts_.count);
  for (int n = 1; n < c.half_layers(); n += 2) {
    for (int e = e0; e < e1; ++e) add(c, TensorRole::kExpertFc1, n, e);
    for (int e = e0; e < e1; ++e) add(c, TensorRole::kExpertFc2, n, e);
  }
}

const ParamEntry* ParamTable::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const ParamEntry& ParamTable::at(const std::string& name) const {
  const ParamEntry* e = find(name);
  if (e == nullptr) fail("internal error: no parameter named '{}'", name);
  return *e;
}

ZeroLayout zero_layout(const ParamTable& table) {
  ZeroLayout layout;
  for (const ParamEntry& e : table.entries()) {
    // The matrices are the GEMM weights: under bf16 GEMMs only their bf16 copy is read.
    layout.tensors.push_back({e.offset, e.numel, e.half_layer, e.kind == ParamKind::kMatrix});
    if (e.offset < table.dense_floats()) ++layout.dense_count;
  }
  layout.total_floats = table.total_floats();
  return layout;
}

void init_params(const ParamTable& table, float* base, const ZayaConfig& c, uint64_t seed) {
  for (const ParamEntry& e : table.entries()) init_param(e, base + e.offset, c, seed);
}

void init_param(const ParamEntry& e, float* p, const ZayaConfig& c, uint64_t seed) {
  // One Philox stream per tensor, from its name: a tensor's values depend on
  // neither the other tensors nor which experts this rank holds.
  const uint64_t stream = name_stream(e.name);
  switch (e.init) {
    case InitKind::kNormal: fill_normal(p, e.numel, 0.0f, e.init_std, seed, stream); break;
    case InitKind::kOnes:
      for (int64_t i = 0; i < e.numel; ++i) p[i] = 1.0f;
      break;
    case InitKind::kZeros:
      for (int64_t i = 0; i < e.numel; ++i) p[i] = 0.0f;
      break;
    case InitKind::kConvDepthwise: {  // [C, 1, k0]: out[t] ~ in[t] (tap k0 - 1 is the newest step)
      fill_normal(p, e.numel, 0.0f, e.init_std, seed, stream);
      const int64_t k = e.shape[2];
      for (int64_t ch = 0; ch < e.shape[0]; ++ch) p[ch * k + k - 1] += 1.0f;
      break;
    }
    case InitKind::kConvGrouped: {  // [C, d, k1]: identity within the group on the newest tap k1 - 1
      fill_normal(p, e.numel, 0.0f, e.init_std, seed, stream);
      const int64_t d = c.head_dim, k = e.shape[2];
      for (int64_t o = 0; o < e.shape[0]; ++o) p[(o * d + o % d) * k + k - 1] += 1.0f;
      break;
    }
  }
}

ParamCounts count_parameters(const ZayaConfig& c) {
  ParamTable table(c, true);
  ParamCounts counts;
  for (const ParamEntry& e : table.entries()) {
    counts.total += e.numel;
    if (e.kind == ParamKind::kEmbedding) counts.embedding += e.numel;
    if (e.expert < 0 || e.expert < c.top_k) counts.active += e.numel;  // top_k experts' worth per layer
  }
  return counts;
}

}  // namespace zaya
