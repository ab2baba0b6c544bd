#pragma once
// Every tensor of a ZAYA1 model, declared once (as llama.cpp's llama-arch
// table does for its architectures): its role, where it sits, its shape, how
// it is trained and initialised, and its name in each layout zaya.cpp reads
// and writes:
//
//   legacy  the 80-half-layer Hugging Face layout of ZAYA1-base (spec §6.1),
//           also the names of our checkpoints and of the parameter arena
//   native  the 40-layer layout of ZAYA1-8B and later (spec §6.3): renamed,
//           experts stacked into one [E, ...] tensor per layer
//   GGUF    llama.cpp-style names (docs/formats-gguf.md): blk.N.*, experts
//           stacked, fc1 split into its gate and up halves
//
// The parameter table (params.h) lays out the entries of this table for a
// config; the training weights (weights.h), the inference weights
// (infer/infer_model.h), the safetensors and GGUF writers and readers all go
// through the roles and names here, so adding or renaming a tensor is one
// row below.
//
// Positions: a tensor of a half-layer carries the half-layer index n
// (0..2L-1: even = CCA attention, odd = MoE). The residual merges (spec §5)
// sit at merge point n (the input of half-layer n) or at the final merge,
// written n = -1 like the other global tensors. Expert tensors also carry the
// global expert index.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "zaya/model/config.h"

namespace zaya {

enum class TensorRole : uint8_t {
  // global
  kEmbedding,  // the embedding, also the LM head when tied
  kFinalNorm,
  kLmHead,  // an untied LM head [V, D] (tie_word_embeddings = false)
  // residual scaling at a merge point: (h + hidden_bias) * hidden_scale + (res + residual_bias) * residual_scale
  kMergeHiddenScale,
  kMergeHiddenBias,
  kMergeResidualScale,  // absent at merge point 0 (the embedding has no residual)
  kMergeResidualBias,
  // CCA attention half-layer (spec §3)
  kAttnNorm,
  kAttnQ,
  kAttnK,
  kAttnVCurrent,  // value stream of the current token
  kAttnVDelayed,  // value stream of the previous token
  kConvDepthwise,
  kConvDepthwiseBias,
  kConvGrouped,
  kConvGroupedBias,
  kKeyTemperature,
  kAttnOut,
  // MoE half-layer: router (spec §4)
  kMoeNorm,
  kRouterDown,
  kRouterDownBias,
  kRouterStateScale,  // EDA; absent on the first MoE half-layer and without EDA
  kRouterNorm,
  kRouterFc1,
  kRouterFc1Bias,
  kRouterFc2,
  kRouterFc2Bias,
  kRouterOut,
  kBalancingBias,  // a buffer (not trained by gradients)
  // MoE half-layer: experts (SwiGLU)
  kExpertFc1,  // [2F, D]: gate rows, then up rows
  kExpertFc2,  // [D, F]
};

enum class TensorScope : uint8_t { kGlobal, kMerge, kAttention, kMoe, kExpert };

enum class ParamKind : uint8_t {
  kEmbedding,  // the embedding and an untied LM head (no Muon; counted as embedding parameters)
  kMatrix,     // 2-D hidden weight matrix (Muon)
  kConv,       // CCA convolution weights
  kVector,     // norm weights, biases, residual scales, EDA scales, temperatures
};

enum class InitKind : uint8_t {
  kNormal,         // N(0, std)
  kOnes,           // 1
  kZeros,          // 0
  kConvDepthwise,  // tap 1 (current step) = 1, tap 0 = 0, plus N(0, std)
  kConvGrouped,    // identity on tap 1 within each head group, plus N(0, std)
};

// The standard deviation of a kNormal-like initialisation (spec §10, docs/model.md).
enum class InitScale : uint8_t {
  kNone,
  kBase,     // 0.02
  kOutput,   // 0.02 / sqrt(2 * blocks): output projections (GPT-2)
  kGrouped,  // 0.02 / sqrt(head_dim): the grouped convolution's d inputs per output
};

struct TensorDecl {
  TensorRole role;
  TensorScope scope;
  const char* legacy;  // full name (global), or the part after "model.layers.N." / the merge prefix
  const char* native;  // likewise after the native prefix
  const char* gguf;    // likewise after "blk.N." (merges: after "<stage>_merge_")
  ParamKind kind;
  InitKind init;
  InitScale scale;
  bool buffer;  // true: a buffer (balancing biases), not a parameter
  // The LoRA column (docs/training.md "LoRA"): the name of the target when the
  // matrix may carry an adapter, null when not. It is the name [lora] targets
  // takes and adapter_config.json records (target_modules, or
  // target_parameters for the stacked expert weights), PEFT matching it as a
  // suffix of the native path. model/lora.h numbers these rows as its targets.
  const char* lora;
};

// Every row, in the order the parameter table lays a half-layer out.
std::span<const TensorDecl> tensor_decls();
const TensorDecl& tensor_decl(TensorRole role);

// The rows with a LoRA column value, in table order: LoraTarget k
// (model/lora.h) is the k-th of them.
std::span<const TensorRole> lora_target_roles();

// Whether the tensor exists at half-layer (or merge point) `n` of `config`.
bool tensor_present(TensorRole role, int n, const ZayaConfig& config);
// Its shape, in PyTorch layout ([out, in] for linear weights).
std::vector<int64_t> tensor_shape(TensorRole role, const ZayaConfig& config);
// The same without allocating (asked inside the training step: LoRA slots).
struct TensorDims {
  std::array<int64_t, 3> dims{};
  int rank = 0;
};
TensorDims tensor_dims(TensorRole role, const ZayaConfig& config);
// The initial standard deviation of kNormal / conv initialisations.
float tensor_init_std(TensorRole role, const ZayaConfig& config);

// Names. n: half-layer or merge point (-1: global / final merge); expert:
// global index for kExpertFc1/2, else -1.
std::string legacy_tensor_name(TensorRole role, int n, int expert = -1);

// Where a tensor lives in a native checkpoint: the native tensor and, for
// expert weights, the slice of the stacked [E, ...] tensor.
struct NativeTensorRef {
  std::string name;
  int64_t expert = -1;
};
NativeTensorRef native_tensor_ref(TensorRole role, int n, int expert, const ZayaConfig& config);
// The same, by legacy name (tests, tools); fails naming an unknown tensor.
NativeTensorRef native_tensor_for(const std::string& legacy_name, const ZayaConfig& config);

// The GGUF tensor that holds the role at half-layer n (for kExpertFc1, part 0
// is the gate half and part 1 the up half; both are stacked over experts).
std::string gguf_tensor_name(TensorRole role, int n, int part = 0);

// "model.layers.N."
std::string layer_prefix(int half_layer);

}  // namespace zaya
