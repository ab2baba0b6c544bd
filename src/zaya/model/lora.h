#pragma once
// LoRA adapters (docs/training.md "LoRA"): for each targeted matrix W of
// every layer,
//
//   y = x W^T + (alpha / rank) * drop(x) A^T B^T,   A [rank, in], B [out, rank]
//
// (ops/lora_linear.h). The targets are declared once, as the LoRA column of
// the tensor table (model/tensor_table.cc): which matrices may carry an
// adapter and their PEFT names; every training block applies them through one
// helper (ops/adapted_linear.h, bound by model/lora_branch.h). Three kinds:
//
//   attention  q_proj, k_proj, v_proj_current, v_proj_delayed, o_proj: named
//              as PEFT names them, by the module leaf of the native layout's
//              path (model/tensor_table.cc), e.g. q_proj for
//              model.layers.N.self_attn.qkv_proj.q_proj. q, k and the two value
//              projections are rows of the fused qkv matrix (weights.h): their
//              adapters add into their column range of the fused output.
//   router     mlp.gate.down_proj, mlp.gate.router_mlp.fc1, .fc2, .out_proj:
//              the router's nn.Linear modules (PEFT target_modules).
//   experts    mlp.experts.gate_up_proj, mlp.experts.down_proj: the stacked
//              [E, ...] expert parameters of the native layout (PEFT
//              target_parameters, its ParamWrapper). Every expert e has its
//              own A_e, B_e, applied to exactly the rows routed to e (the
//              skip slot has none). No dropout: PEFT cannot express it there.
//
// LoraAdapters owns one float32 arena of every A and B; LoraViews binds the
// same layout into another base (their gradients, optimizer moments). An
// expert target stores its experts' matrices stacked: A [E, rank, in],
// B [E, out, rank]. The PEFT files store those transposed and interleaved
// (formats/lora_peft.h); merge_lora gives exactly PEFT's delta.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/core/enum_names.h"
#include "zaya/model/config.h"
#include "zaya/model/params.h"
#include "zaya/model/tensor_table.h"
#include "zaya/model/weights.h"
#include "zaya/ops/lora_linear.h"
#include "zaya/ops/matvec.h"

namespace zaya {

// The rows of the tensor table's LoRA column, in table order (their names,
// roles, kinds and shapes come from the table). The numbering is part of the
// dropout streams and the adapters' initialisation: a target goes where its
// row is. LoraTarget.MatchesTheTensorTablesLoraColumn checks the two agree.
enum class LoraTarget : uint8_t {
  // attention half-layer (target_modules)
  kQ,
  kK,
  kVCurrent,
  kVDelayed,
  kO,
  // the router of the MoE half-layer (target_modules)
  kRouterDown,
  kRouterFc1,
  kRouterFc2,
  kRouterOut,
  // the experts of the MoE half-layer (target_parameters)
  kExpertGateUp,
  kExpertDown,
};
inline constexpr int kLoraTargetCount = 11;
// The attention targets are the first ones (their dropout streams predate the others).
inline constexpr int kLoraAttentionTargetCount = 5;
// The targets on the fused q/k/v projection (they read the attention block's normed input).
inline constexpr std::array<LoraTarget, 4> kLoraQkvTargets = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kVCurrent,
                                                              LoraTarget::kVDelayed};

enum class LoraTargetKind : uint8_t { kAttention, kRouter, kExpert };
LoraTargetKind lora_target_kind(LoraTarget target);  // from the row's scope
// The tensor table row the target adapts.
TensorRole lora_target_role(LoraTarget target);
inline bool lora_is_expert(LoraTarget t) { return lora_target_kind(t) == LoraTargetKind::kExpert; }

// The [lora] targets name: q_proj, k_proj, v_proj_current, v_proj_delayed,
// o_proj, mlp.gate.down_proj, mlp.gate.router_mlp.fc1, mlp.gate.router_mlp.fc2,
// mlp.gate.router_mlp.out_proj, mlp.experts.gate_up_proj, mlp.experts.down_proj.
// The same names go into adapter_config.json (target_modules, or
// target_parameters for the expert targets), where PEFT matches them as
// suffixes of the native module (parameter) paths.
std::string_view lora_target_name(LoraTarget target);
// All of them in the order above.
std::vector<LoraTarget> all_lora_targets();
// The attention targets: q_proj, k_proj, v_proj_current, v_proj_delayed, o_proj, the default of [lora] targets.
// (Out of line: GCC 12 warns of maybe-uninitialized memory where the initializer list is inlined.)
std::vector<LoraTarget> default_lora_targets();
// The allowed names, comma separated (for error messages).
std::string lora_target_names();
// The target called `name`; throws naming `where` and the allowed names.
LoraTarget parse_lora_target(const std::string& name, const std::string& where);

// How the frozen base holds the routed experts during LoRA (docs/training.md "LoRA over a quantized base",
// [lora] base_dtype): kFloat as train.precision holds the base (float32, or bf16 for a frozen bf16 base); kMxfp4,
// kFp8, kInt8 as packed rows only (QLoRA: model/model.h, ops/quant_linear.h), read from a quantized checkpoint as
// stored or quantized at load.
enum class LoraBaseDtype : uint8_t { kFloat, kMxfp4, kFp8, kInt8 };
inline constexpr EnumName<LoraBaseDtype> kLoraBaseDtypeNames[] = {{LoraBaseDtype::kFloat, "float"},
                                                                  {LoraBaseDtype::kMxfp4, "mxfp4"},
                                                                  {LoraBaseDtype::kFp8, "fp8"},
                                                                  {LoraBaseDtype::kInt8, "int8"}};
// The experts' WeightType (kF32 for kFloat).
WeightType lora_base_expert_type(LoraBaseDtype dtype);

struct LoraConfig {
  bool enabled = false;  // a [lora] section was given
  int64_t rank = 8;      // r
  double alpha = 16;     // lora_alpha: the branch is scaled by alpha / rank
  double dropout = 0;    // lora_dropout: on the adapter's input only (0 with expert targets)
  std::vector<LoraTarget> targets = default_lora_targets();
  bool train_biases = false;                         // whether the balancing controller still updates the biases
  LoraBaseDtype base_dtype = LoraBaseDtype::kFloat;  // how the frozen base holds the routed experts
  bool quantized_base() const { return base_dtype != LoraBaseDtype::kFloat; }
  double scale() const { return alpha / double(rank); }
  bool targets_has(LoraTarget t) const;
  bool has_expert_targets() const;
  // Whether an adapter sits on the fused q/k/v projection (reading the attention block's normed input).
  bool has_qkv_targets() const;
};

// Where a target sits in its base weight: rows [row_offset, row_offset + out)
// of a matrix with `in` columns (the fused qkv rows; 0 for the others). For an
// expert target: one expert's matrix.
struct LoraSlot {
  int64_t in = 0;
  int64_t out = 0;
  int64_t row_offset = 0;
};
LoraSlot lora_slot(const ZayaConfig& config, LoraTarget target);

// The native layout's module path of a target in block `block`, e.g.
// model.layers.3.self_attn.qkv_proj.q_proj or model.layers.3.mlp.gate.down_proj;
// for an expert target the stacked parameter's path,
// model.layers.3.mlp.experts.gate_up_proj (module model.layers.3.mlp.experts).
std::string lora_module_path(const ZayaConfig& config, int64_t block, LoraTarget target);

// One target's A and B. For an expert target, expert 0's of the stacked
// [E, rank, in] / [E, out, rank]; expert(e) gives expert e's.
struct LoraMatrices {
  float* a_rI = nullptr;
  float* b_Or = nullptr;
  int64_t a_stride = 0;  // floats between two experts' A (0: not an expert target)
  int64_t b_stride = 0;
  LoraMatrices expert(int64_t e) const { return {a_rI + e * a_stride, b_Or + e * b_stride, 0, 0}; }
};
// Per block, per target (null where not targeted).
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
    int64_t experts = 1;   // E for an expert target, else 1
    int64_t a_offset = 0;  // [experts, rank, in] floats from the arena's start
    int64_t b_offset = 0;  // [experts, out, rank]
    int64_t a_floats(int64_t rank) const { return experts * rank * slot.in; }
    int64_t b_floats(int64_t rank) const { return experts * slot.out * rank; }
  };

  // PEFT's initialisation (init_lora_weights = true): its lora_A
  // Kaiming-uniform (a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in))),
  // its lora_B zero, so the adapted model starts equal to the base. For
  // nn.Linear targets PEFT's lora_A is our A (fan_in = in); for an expert
  // parameter it is our B transposed (fan_in = out, formats/lora_peft.h), so
  // there B is drawn and A is zero. From Philox keyed by seed and the entry.
  void init(uint64_t seed);

  const ZayaConfig& model_config() const { return model_; }
  const LoraConfig& config() const { return lora_; }
  // A number no other LoraAdapters of this process has (from 1): what a cache
  // of states computed under an adapter keys them by (infer/prefix_cache.h).
  uint64_t serial() const { return serial_; }
  const std::vector<Entry>& entries() const { return entries_; }
  int64_t total_floats() const { return total_; }
  float* data() { return arena_.data(); }
  const float* data() const { return arena_.data(); }
  const LoraViews& views() const { return views_; }
  // The same layout bound into `base` (total_floats() floats).
  LoraViews bind(float* base) const;
  // The adapters as a parameter table (for the optimizer and checkpoints),
  // AdamW, no weight decay: nn.Linear targets under PEFT's tensor names
  // (peft_lora_a_name below), expert targets as lora_expert_a_name / _b_name.
  const ParamTable& table() const { return table_; }

 private:
  ZayaConfig model_;
  LoraConfig lora_;
  uint64_t serial_ = 0;
  int64_t total_ = 0;  // set while entries_ is laid out (declared before it)
  std::vector<Entry> entries_;
  Arena arena_;
  LoraViews views_;
  ParamTable table_;
};

// LoraAdapters(model, lora).table() without the adapters' memory (offline tools).
ParamTable lora_adapter_table(const ZayaConfig& model, const LoraConfig& lora);

// PEFT's tensor names of one nn.Linear adapter's A and B (attention and router
// targets), which are also their names in our checkpoints:
// base_model.model.<module path>.lora_A.weight / .lora_B.weight (the PEFT files:
// formats/lora_peft.h).
std::string peft_lora_a_name(const ZayaConfig& config, int64_t block, LoraTarget target);
std::string peft_lora_b_name(const ZayaConfig& config, int64_t block, LoraTarget target);

// The checkpoint names of an expert target's stacked A [E, rank, in] and
// B [E, out, rank]: lora.<parameter path>.A / .B.
std::string lora_expert_a_name(const ZayaConfig& config, int64_t block, LoraTarget target);
std::string lora_expert_b_name(const ZayaConfig& config, int64_t block, LoraTarget target);

// W += (alpha / rank) B A for every adapter (per expert for expert targets):
// the merged full weights. `weights` holds every expert (an export's model).
void merge_lora(const LoraAdapters& adapters, const ModelWeights& weights);

// The adapters of one block for one pass (both half-layers): the adapters,
// their gradients (backward only), the adapter inputs kept for backward and
// scratch. Null matrices: not targeted.
struct BlockLora {
  const std::array<LoraMatrices, kLoraTargetCount>* weights = nullptr;
  const std::array<LoraMatrices, kLoraTargetCount>* grads = nullptr;
  // drop(x) A^T of each target: [T, rank] (attention, router), or [X, rank]
  // over the expert-major rows this rank's experts process (expert targets).
  std::array<float*, kLoraTargetCount> h{};
  float* scratch = nullptr;  // lora_backward_scratch_floats of the largest target
  int64_t rank = 0;
  double scale = 1.0;
  double dropout = 0.0;
  uint64_t seed = 0;
  uint64_t stream = 0;  // unique per pass and block; each target derives its own

  bool has(LoraTarget t) const { return (*weights)[size_t(t)].a_rI != nullptr; }
  // The op's shape for target t over `tokens` rows whose output rows are `out_stride` apart
  // (dropout: on the attention and router targets only).
  LoraShape shape(const ZayaConfig& config, LoraTarget t, int64_t tokens, int64_t out_stride) const;
};

}  // namespace zaya
