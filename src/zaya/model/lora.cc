#include "zaya/model/lora.h"

#include <fmt/format.h>

#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/model/lora_peft.h"
#include "zaya/model/tensor_table.h"
#include "zaya/ops/lora_linear.h"

namespace zaya {

namespace {

constexpr std::array<LoraTarget, kLoraTargetCount> kAllTargets = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kVCurrent,
                                                                  LoraTarget::kVDelayed, LoraTarget::kO};

TensorRole target_role(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return TensorRole::kAttnQ;
    case LoraTarget::kK: return TensorRole::kAttnK;
    case LoraTarget::kVCurrent: return TensorRole::kAttnVCurrent;
    case LoraTarget::kVDelayed: return TensorRole::kAttnVDelayed;
    case LoraTarget::kO: return TensorRole::kAttnOut;
  }
  ZAYA_ASSERT(false);
  return TensorRole::kAttnQ;
}

}  // namespace

std::string_view lora_target_name(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return "q_proj";
    case LoraTarget::kK: return "k_proj";
    case LoraTarget::kVCurrent: return "v_proj_current";
    case LoraTarget::kVDelayed: return "v_proj_delayed";
    case LoraTarget::kO: return "o_proj";
  }
  ZAYA_ASSERT(false);
  return "";
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

LoraSlot lora_slot(const ZayaConfig& c, LoraTarget t) {
  const int64_t D = c.hidden, Q = c.q_width(), K = c.kv_width(), half = K / 2;
  switch (t) {
    case LoraTarget::kQ: return {D, Q, 0};
    case LoraTarget::kK: return {D, K, Q};
    case LoraTarget::kVCurrent: return {D, half, Q + K};
    case LoraTarget::kVDelayed: return {D, half, Q + K + half};
    case LoraTarget::kO: return {Q, D, 0};
  }
  ZAYA_ASSERT(false);
  return {};
}

std::string lora_module_path(const ZayaConfig& c, int64_t block, LoraTarget t) {
  std::string name = native_tensor_ref(target_role(t), int(2 * block), -1, c).name;
  const std::string suffix = ".weight";
  ZAYA_ASSERT(name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
  return name.substr(0, name.size() - suffix.size());
}

namespace {

ParamTable adapter_table(const ZayaConfig& c, const LoraConfig& lora, const std::vector<LoraAdapters::Entry>& entries) {
  std::vector<ParamEntry> out;
  for (const LoraAdapters::Entry& e : entries) {
    ParamEntry a;
    a.role = target_role(e.target);
    a.kind = ParamKind::kMatrix;
    a.half_layer = int(2 * e.block);
    ParamEntry b = a;
    a.name = peft_lora_a_name(c, e.block, e.target);
    a.shape = {lora.rank, e.slot.in};
    a.offset = e.a_offset;
    a.numel = lora.rank * e.slot.in;
    b.name = peft_lora_b_name(c, e.block, e.target);
    b.shape = {e.slot.out, lora.rank};
    b.offset = e.b_offset;
    b.numel = e.slot.out * lora.rank;
    out.push_back(a);
    out.push_back(b);
  }
  return ParamTable(std::move(out));
}

std::vector<LoraAdapters::Entry> adapter_entries(const ZayaConfig& model, const LoraConfig& lora, int64_t& total) {
  ZAYA_CHECK(lora.rank >= 1, "LoRA rank {} must be >= 1", lora.rank);
  ZAYA_CHECK(!lora.targets.empty(), "LoRA needs at least one target; allowed: {}", lora_target_names());
  std::vector<LoraAdapters::Entry> entries;
  total = 0;
  for (int64_t b = 0; b < model.num_blocks; ++b) {
    for (LoraTarget t : kAllTargets) {
      if (!lora.targets_has(t)) continue;
      LoraAdapters::Entry e;
      e.block = b;
      e.target = t;
      e.slot = lora_slot(model, t);
      e.a_offset = total;
      total += int64_t(align_floats(size_t(lora.rank * e.slot.in)));
      e.b_offset = total;
      total += int64_t(align_floats(size_t(e.slot.out * lora.rank)));
      entries.push_back(e);
    }
  }
  return entries;
}

}  // namespace

LoraAdapters::LoraAdapters(const ZayaConfig& model, const LoraConfig& lora)
    : model_(model),
      lora_(lora),
      entries_(adapter_entries(model, lora, total_)),
      table_(adapter_table(model, lora, entries_)) {
  arena_.reset(size_t(total_));
  arena_.zero();
  views_ = bind(arena_.data());
}

LoraViews LoraAdapters::bind(float* base) const {
  LoraViews v(size_t(model_.num_blocks));
  for (const Entry& e : entries_) v[size_t(e.block)][size_t(e.target)] = {base + e.a_offset, base + e.b_offset};
  return v;
}

void LoraAdapters::init(uint64_t seed) {
  arena_.zero();
  for (size_t k = 0; k < entries_.size(); ++k) {
    const Entry& e = entries_[k];
    // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / 6), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    const float bound = float(1.0 / std::sqrt(double(e.slot.in)));
    const uint64_t stream = 0x4c6f5241ull ^ (uint64_t(e.block) << 8) ^ uint64_t(e.target);
    float* a = arena_.data() + e.a_offset;
    for (int64_t i = 0; i < lora_.rank * e.slot.in; ++i) a[i] = bound * (2 * uniform01(seed, stream, uint64_t(i)) - 1);
  }
}

void merge_lora(const LoraAdapters& adapters, const ModelWeights& w) {
  const LoraConfig& lora = adapters.config();
  for (const LoraAdapters::Entry& e : adapters.entries()) {
    const AttentionWeights& aw = w.attn[size_t(e.block)];
    float* base = (e.target == LoraTarget::kO ? aw.o_DQ : aw.qkv_PD) + e.slot.row_offset * e.slot.in;
    lora_merge<float>(base, adapters.data() + e.a_offset, adapters.data() + e.b_offset, e.slot.in, e.slot.out,
                      lora.rank, lora.scale());
  }
}

}  // namespace zaya
