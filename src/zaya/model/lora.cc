#include "zaya/model/lora.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

WeightType lora_base_expert_type(LoraBaseDtype dtype) {
  switch (dtype) {
    case LoraBaseDtype::kMxfp4: return WeightType::kMXFP4;
    case LoraBaseDtype::kFp8: return WeightType::kFP8;
    case LoraBaseDtype::kInt8: return WeightType::kI8;
    default: return WeightType::kF32;
  }
}

namespace {

// The targets are the rows of the tensor table's LoRA column
// (model/tensor_table.cc), numbered in table order; LoraTarget names them.
const TensorDecl& target_decl(LoraTarget t) {
  const std::span<const TensorRole> roles = lora_target_roles();
  ZAYA_ASSERT(roles.size() == size_t(kLoraTargetCount) && size_t(t) < roles.size());
  return tensor_decl(roles[size_t(t)]);
}

constexpr std::array<LoraTarget, kLoraTargetCount> kAllTargets = [] {
  std::array<LoraTarget, kLoraTargetCount> all{};
  for (int k = 0; k < kLoraTargetCount; ++k) all[size_t(k)] = LoraTarget(k);
  return all;
}();

// The half-layer of block b that holds the target.
int target_half_layer(int64_t block, LoraTarget t) {
  return int(2 * block + (lora_target_kind(t) == LoraTargetKind::kAttention ? 0 : 1));
}

}  // namespace

TensorRole lora_target_role(LoraTarget t) { return target_decl(t).role; }

LoraTargetKind lora_target_kind(LoraTarget t) {
  switch (target_decl(t).scope) {
    case TensorScope::kAttention: return LoraTargetKind::kAttention;
    case TensorScope::kMoe: return LoraTargetKind::kRouter;
    case TensorScope::kExpert: return LoraTargetKind::kExpert;
    case TensorScope::kGlobal:
    case TensorScope::kMerge: break;
  }
  ZAYA_ASSERT(false);  // the LoRA column holds half-layer matrices only
  return LoraTargetKind::kAttention;
}

std::string_view lora_target_name(LoraTarget t) { return target_decl(t).lora; }

std::vector<LoraTarget> all_lora_targets() { return {kAllTargets.begin(), kAllTargets.end()}; }

std::vector<LoraTarget> default_lora_targets() {
  return {kAllTargets.begin(), kAllTargets.begin() + kLoraAttentionTargetCount};
}

std::string lora_target_names() {
  std::string s;
  for (LoraTarget t : kAllTargets) s += (s.empty() ? "" : ", ") + std::string(lora_target_name(t));
  return s;
}

LoraTarget parse_lora_target(const std::string& name, const std::string& where) {
  for (LoraTarget t : kAllTargets)
    if (lora_target_name(t) == name) return t;
  fail("{}: LoRA target '{}' is not supported; allowed: {}", where, name, lora_target_names());
}

bool LoraConfig::targets_has(LoraTarget t) const {
  for (LoraTarget x : targets)
    if (x == t) return true;
  return false;
}

bool LoraConfig::has_expert_targets() const {
  for (LoraTarget x : targets)
    if (lora_is_expert(x)) return true;
  return false;
}

bool LoraConfig::has_qkv_targets() const {
  for (LoraTarget x : kLoraQkvTargets)
    if (targets_has(x)) return true;
  return false;
}

LoraSlot lora_slot(const ZayaConfig& c, LoraTarget t) {
  // [out, in] from the table; q, k and the value streams are consecutive row
  // ranges of the fused q/k/v weight, in this order (model/weights.h qkv_PD).
  // (tensor_dims: the step loop asks, and allocates nothing.)
  const TensorDims shape = tensor_dims(lora_target_role(t), c);
  LoraSlot slot{shape.dims[1], shape.dims[0], 0};
  for (LoraTarget fused : kLoraQkvTargets) {
    if (fused == t) return slot;  // after the rows of the fused targets before it
    slot.row_offset += tensor_dims(lora_target_role(fused), c).dims[0];
  }
  slot.row_offset = 0;  // a weight of its own
  return slot;
}

std::string lora_module_path(const ZayaConfig& c, int64_t block, LoraTarget t) {
  std::string name = native_tensor_ref(lora_target_role(t), target_half_layer(block, t), 0, c).name;
  if (lora_is_expert(t)) return name;  // a stacked parameter: no ".weight"
  const std::string suffix = ".weight";
  ZAYA_ASSERT(name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
  return name.substr(0, name.size() - suffix.size());
}

std::string peft_lora_a_name(const ZayaConfig& c, int64_t block, LoraTarget t) {
  ZAYA_ASSERT(!lora_is_expert(t));
  return "base_model.model." + lora_module_path(c, block, t) + ".lora_A.weight";
}

std::string peft_lora_b_name(const ZayaConfig& c, int64_t block, LoraTarget t) {
  ZAYA_ASSERT(!lora_is_expert(t));
  return "base_model.model." + lora_module_path(c, block, t) + ".lora_B.weight";
}

std::string lora_expert_a_name(const ZayaConfig& c, int64_t block, LoraTarget t) {
  return "lora." + lora_module_path(c, block, t) + ".A";
}

std::string lora_expert_b_name(const ZayaConfig& c, int64_t block, LoraTarget t) {
  return "lora." + lora_module_path(c, block, t) + ".B";
}

namespace {

ParamTable adapter_table(const ZayaConfig& c, const LoraConfig& lora, const std::vector<LoraAdapters::Entry>& entries) {
  std::vector<ParamEntry> out;
  for (const LoraAdapters::Entry& e : entries) {
    const bool expert = lora_is_expert(e.target);
    ParamEntry a;
    a.role = lora_target_role(e.target);
    a.kind = ParamKind::kMatrix;
    a.half_layer = target_half_layer(e.block, e.target);
    ParamEntry b = a;
    a.name = expert ? lora_expert_a_name(c, e.block, e.target) : peft_lora_a_name(c, e.block, e.target);
    a.shape = {lora.rank, e.slot.in};
    a.offset = e.a_offset;
    a.numel = e.a_floats(lora.rank);
    b.name = expert ? lora_expert_b_name(c, e.block, e.target) : peft_lora_b_name(c, e.block, e.target);
    b.shape = {e.slot.out, lora.rank};
    b.offset = e.b_offset;
    b.numel = e.b_floats(lora.rank);
    if (expert) {
      a.shape.insert(a.shape.begin(), e.experts);
      b.shape.insert(b.shape.begin(), e.experts);
    }
    out.push_back(a);
    out.push_back(b);
  }
  return ParamTable(std::move(out));
}

std::vector<LoraAdapters::Entry> adapter_entries(const ZayaConfig& model, const LoraConfig& lora, int64_t& total) {
  ZAYA_CHECK(lora.rank >= 1, "LoRA rank {} must be >= 1", lora.rank);
  ZAYA_CHECK(!lora.targets.empty(), "LoRA needs at least one target; allowed: {}", lora_target_names());
  ZAYA_CHECK(!(lora.has_expert_targets() && lora.dropout > 0),
             "LoRA dropout {} with expert targets: PEFT's ParamWrapper (target_parameters) has no dropout; allowed: "
             "dropout 0, or no mlp.experts.* targets",
             lora.dropout);
  std::vector<LoraAdapters::Entry> entries;
  total = 0;
  for (int64_t b = 0; b < model.num_blocks; ++b) {
    for (LoraTarget t : kAllTargets) {
      if (!lora.targets_has(t)) continue;
      LoraAdapters::Entry e;
      e.block = b;
      e.target = t;
      e.slot = lora_slot(model, t);
      e.experts = lora_is_expert(t) ? model.experts : 1;
      e.a_offset = total;
      total += int64_t(align_floats(size_t(e.a_floats(lora.rank))));
      e.b_offset = total;
      total += int64_t(align_floats(size_t(e.b_floats(lora.rank))));
      entries.push_back(e);
    }
  }
  return entries;
}

}  // namespace

ParamTable lora_adapter_table(const ZayaConfig& model, const LoraConfig& lora) {
  int64_t total = 0;
  return adapter_table(model, lora, adapter_entries(model, lora, total));
}

namespace {
uint64_t next_adapter_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}
}  // namespace

LoraAdapters::LoraAdapters(const ZayaConfig& model, const LoraConfig& lora)
    : model_(model),
      lora_(lora),
      serial_(next_adapter_serial()),
      entries_(adapter_entries(model, lora, total_)),
      table_(adapter_table(model, lora, entries_)) {
  arena_.reset(size_t(std::max<int64_t>(total_, 1)));
  arena_.zero();
  views_ = bind(arena_.data());
}

LoraViews LoraAdapters::bind(float* base) const {
  LoraViews v(size_t(model_.num_blocks));
  for (const Entry& e : entries_) {
    LoraMatrices& m = v[size_t(e.block)][size_t(e.target)];
    m = {base + e.a_offset, base + e.b_offset, 0, 0};
    if (lora_is_expert(e.target)) {
      m.a_stride = lora_.rank * e.slot.in;
      m.b_stride = e.slot.out * lora_.rank;
    }
  }
  return v;
}

void LoraAdapters::init(uint64_t seed) {
  arena_.zero();
  for (size_t k = 0; k < entries_.size(); ++k) {
    const Entry& e = entries_[k];
    // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / 6), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    const bool expert = lora_is_expert(e.target);
    const int64_t fan_in = expert ? e.slot.out : e.slot.in;
    const float bound = float(1.0 / std::sqrt(double(fan_in)));
    const uint64_t stream = 0x4c6f5241ull ^ (uint64_t(e.block) << 8) ^ uint64_t(e.target);
    float* p = arena_.data() + (expert ? e.b_offset : e.a_offset);
    const int64_t n = expert ? e.b_floats(lora_.rank) : e.a_floats(lora_.rank);
    for (int64_t i = 0; i < n; ++i) p[i] = bound * (2 * uniform01(seed, stream, uint64_t(i)) - 1);
  }
}

void merge_lora(const LoraAdapters& adapters, const ModelWeights& w) {
  const LoraConfig& lora = adapters.config();
  const ZayaConfig& c = adapters.model_config();
  for (const LoraAdapters::Entry& e : adapters.entries()) {
    const float* a = adapters.data() + e.a_offset;
    const float* b = adapters.data() + e.b_offset;
    if (lora_is_expert(e.target)) {
      const MoeWeights& mw = w.moe[size_t(e.block)];
      ZAYA_CHECK(mw.expert_first == 0 && mw.expert_count == c.experts,
                 "internal error: merging expert adapters needs every expert's weights");
      float* base = e.target == LoraTarget::kExpertGateUp ? mw.fc1_E2FD : mw.fc2_EDF;
      const int64_t per_w = e.slot.out * e.slot.in, per_a = lora.rank * e.slot.in, per_b = e.slot.out * lora.rank;
      for (int64_t x = 0; x < e.experts; ++x)
        lora_merge<float>(base + x * per_w, a + x * per_a, b + x * per_b, e.slot.in, e.slot.out, lora.rank,
                          lora.scale());
      continue;
    }
    float* base = nullptr;
    if (lora_target_kind(e.target) == LoraTargetKind::kAttention) {
      const AttentionWeights& aw = w.attn[size_t(e.block)];
      base = (e.target == LoraTarget::kO ? aw.o_DQ : aw.qkv_PD) + e.slot.row_offset * e.slot.in;
    } else {
      const MoeWeights& mw = w.moe[size_t(e.block)];
      base = e.target == LoraTarget::kRouterDown  ? mw.down_RD
             : e.target == LoraTarget::kRouterFc1 ? mw.mlp0_RR
             : e.target == LoraTarget::kRouterFc2 ? mw.mlp2_RR
                                                  : mw.mlp4_NR;
    }
    lora_merge<float>(base, a, b, e.slot.in, e.slot.out, lora.rank, lora.scale());
  }
}

LoraShape BlockLora::shape(const ZayaConfig& c, LoraTarget t, int64_t tokens, int64_t out_stride) const {
  const LoraSlot slot = lora_slot(c, t);
  LoraShape s;
  s.tokens = tokens;
  s.in = slot.in;
  s.out = slot.out;
  s.rank = rank;
  s.out_stride = out_stride;
  s.scale = scale;
  s.seed = seed;
  switch (lora_target_kind(t)) {
    case LoraTargetKind::kAttention:
      s.dropout = dropout;
      s.stream = stream * kLoraAttentionTargetCount + uint64_t(t);
      break;
    case LoraTargetKind::kRouter:
      // A stream space of its own (the top bit), so no router mask repeats an attention one.
      s.dropout = dropout;
      s.stream = (uint64_t(1) << 63) | (stream * kLoraTargetCount + uint64_t(t));
      break;
    case LoraTargetKind::kExpert: s.dropout = 0; break;  // refused at configuration (LoraAdapters)
  }
  return s;
}

}  // namespace zaya
