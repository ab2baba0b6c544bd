#pragma once
// What the big matrices of an InferModel are stored as, decided once when the
// weights are bound (infer_model.cc) and read as an enum everywhere after:
// the float type of the matrices not in int8, and whether some are int8
// (dtype int8: attention, experts and the LM head in Q8_0 blocks). Its name()
// is the `weights_dtype` the CLI prints and writes ("f32", "bf16", "mixed",
// "int8+bf16", ...).

#include <string>

namespace zaya {

enum class FloatMatrices { kF32, kBF16, kMixed };

struct MatrixTypes {
  FloatMatrices floats = FloatMatrices::kF32;
  bool int8 = false;
  std::string experts;  // "mxfp4" or "fp8": the routed experts kept packed (formats/quantized_experts.h); else empty

  std::string name() const;
};

// Whether the KV cache holds bf16 (engine.h): with bf16 activations, when the float matrices are bf16 (alone,
// mixed with f32, or beside int8 ones), as bf16 inference in PyTorch keeps its cache; an f32 model keeps f32 pages,
// also when some of its matrices are int8 (int8+f32: weight-only quantization of an f32 model, docs/inference.md).
bool kv_cache_bf16(const MatrixTypes& types, bool bf16_activations);

}  // namespace zaya
