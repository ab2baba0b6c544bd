#pragma once
// LoRA adapters on the attention projections (docs/training.md "LoRA"):
// for each targeted projection of each attention half-layer,
//
//   y = x W^T + (alpha / rank) * drop(x) A^T B^T,   A [rank, in], B [out, rank]
//
// (ops/lora_linear.h). The targets are named as PEFT names them: the module
// leaf of the native layout's Hugging Face path (model/tensor_table.cc), e.g.
// q_proj for model.layers.N.self_attn.qkv_proj.q_proj. The projections q, k,
// v_current and v_delayed are rows of the fused qkv matrix (weights.h): their
// adapters add into their column range of the fused output.
//
// LoraAdapters owns one float32 arena of every A and B; LoraViews binds the
// same layout into another base (their gradients, optimizer moments).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/model/config.h"
#include "zaya/model/params.h"
#include "zaya/model/weights.h"

namespace zaya {

enum class LoraTarget { kQ, kK, kVCurrent, kVDelayed, kO };
inline constexpr int kLoraTargetCount = 5;

// The PEFT target_modules name: q_proj, k_proj, v_proj_current, v_proj_delayed, o_proj.
std::string_view lora_target_name(LoraTarget target);
// The allowed names, comma separated (for error messages).
std::string lora_target_names();
// The target called `name`; throws naming `where` and the allowed names.
LoraTarget parse_lora_target(const std::string& name, const std::string& where);

struct LoraConfig {
  bool enabled = false;  // a [lora] section was given
  int64_t rank = 8;      // r
  double alpha = 16;     // lora_alpha: the branch is scaled by alpha / rank
  double dropout = 0;    // lora_dropout: on the adapter's input only
  std::vector<LoraTarget> targets = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kVCurrent, LoraTarget::kVDelayed,
                                     LoraTarget::kO};
  bool train_biases = false;  // whether the balancing controller still updates the biases
  double scale() const { return alpha / double(rank); }
  bool targets_has(LoraTarget t) const;
};

// Where a target sits in its base weight: rows [row_offset, row_offset + out)
// of a matrix with `in` columns (the fused qkv rows, or o_proj).
struct LoraSlot {
  int64_t in = 0;
  int64_t out = 0;
  int64_t row_offset = 0;
};
LoraSlot lora_slot(const ZayaConfig& config, LoraTarget target);

// The native layout's module path of a target in attention block `block`,
// e.g. model.layers.3.self_attn.qkv_proj.q_proj.
std::string lora_module_path(const ZayaConfig& config, int64_t block, LoraTarget target);

struct LoraMatrices {
  float* a_rI = nullptr;
  float* b_Or = nullptr;
};
// Per attention block, per target (null where not targeted).
using LoraViews = std::vector<std::array<LoraMatrices, kLoraTargetCount>>;

class LoraAdapters {
 public:
  LoraAdapters(const ZayaConfig& model, const LoraConfig& lora);
  LoraAdapters(const LoraAdapters&) = delete;
  LoraAdapters& operator=(const LoraAdapters&) = delete;

  struct Entry {
    int64_t block = 0;
    LoraTarget target = LoraTarget::kQ;
    LoraSlot slot;
    int64_t a_offset = 0;  // [rank, in] floats from the arena's start
    int64_t b_offset = 0;  // [out, rank]
  };

  // PEFT's initialisation: A Kaiming-uniform (a = sqrt(5), i.e. U(-1/sqrt(in),
  // 1/sqrt(in))) from Philox keyed by seed and the entry, B zero, so the
  // adapted model starts equal to the base.
  void init(uint64_t seed);

  const ZayaConfig& model_config() const { return model_; }
  const LoraConfig& config() const { return lora_; }
  const std::vector<Entry>& entries() const { return entries_; }
  int64_t total_floats() const { return total_; }
  float* data() { return arena_.data(); }
  const float* data() const { return arena_.data(); }
  const LoraViews& views() const { return views_; }
  // The same layout bound into `base` (total_floats() floats).
  LoraViews bind(float* base) const;
  // The adapters as a parameter table (for the optimizer and checkpoints):
  // PEFT's tensor names (model/lora_peft.h), AdamW, no weight decay.
  const ParamTable& table() const { return table_; }

 private:
  ZayaConfig model_;
  LoraConfig lora_;
  int64_t total_ = 0;  // set while entries_ is laid out (declared before it)
  std::vector<Entry> entries_;
  Arena arena_;
  LoraViews views_;
  ParamTable table_;
};

// W += (alpha / rank) B A for every adapter: the merged full weights.
void merge_lora(const LoraAdapters& adapters, const ModelWeights& weights);

}  // namespace zaya
