#pragma once
// InferModel's builder (infer_model.h): binds every tensor of the layout to
// the weights an InferModel holds. Internal to infer_model.cc and
// infer_model_builder.cc.
#include <cstdint>
#include <set>
#include <string>

#include "zaya/core/enum_names.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/quantized_experts.h"
#include "zaya/infer/infer_model.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/io/safetensors_dtype.h"
#include "zaya/model/params.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

// --dtype of the inference verbs, parsed once (infer_model.h).
// mxfp4 / fp8: the routed experts quantized at load, the other matrices bf16; int8-mxfp4 / int8-fp8: the same
// experts, the rest of the int8 set (attention projections, LM head) in Q8_0 (docs/inference.md).
// mxfp4-all: llama.cpp-style 4-bit, every matrix a decode step reads in full in MXFP4 (mxfp4_all_matrix);
// mxfp4-all-q8head: the same with the LM head in Q8_0, as llama.cpp keeps its output matrix at higher precision.
enum class WeightDtype { kAuto, kBF16, kF32, kInt8, kMxfp4, kFp8, kInt8Mxfp4, kInt8Fp8, kMxfp4All, kMxfp4AllQ8Head };
inline constexpr EnumName<WeightDtype> kWeightDtypeNames[] = {{WeightDtype::kAuto, "auto"},
                                                              {WeightDtype::kBF16, "bf16"},
                                                              {WeightDtype::kF32, "f32"},
                                                              {WeightDtype::kInt8, "int8"},
                                                              {WeightDtype::kMxfp4, "mxfp4"},
                                                              {WeightDtype::kFp8, "fp8"},
                                                              {WeightDtype::kInt8Mxfp4, "int8-mxfp4"},
                                                              {WeightDtype::kInt8Fp8, "int8-fp8"},
                                                              {WeightDtype::kMxfp4All, "mxfp4-all"},
                                                              {WeightDtype::kMxfp4AllQ8Head, "mxfp4-all-q8head"}};

// Binds every tensor of the layout (spec §6.1), from either a safetensors
// directory or a ZayaModel, converting where the requested dtype says so.
struct InferModel::Builder {
  explicit Builder(InferModel& model) : m(model) {}
  InferModel& m;
  const SafetensorsDir* st = nullptr;
  const ZayaModel* zm = nullptr;
  const ZayaGgufFile* q8_file = nullptr;  // a Q8_0 GGUF whose Q8_0 tensors are taken as they are (zm holds the rest)
  WeightDtype want = WeightDtype::kAuto;  // auto, bf16, f32: the matrices that are not int8
  bool int8 = false;                      // the int8 set (zaya_int8_matrix) in Q8_0 blocks
  // dtype mxfp4 / fp8: the routed experts quantized at load (kMXFP4 or kFP8, ops/matvec_lowbit.h); else kF32 (none).
  WeightType expert_lowbit = WeightType::kF32;
  bool all_mxfp4 = false;  // dtype mxfp4-all(-q8head): every mxfp4_all_matrix in MXFP4 too
  bool head_q8 = false;    // dtype mxfp4-all-q8head: the LM head (the embedding when tied) in Q8_0 instead
  std::string label;
  bool native = false;  // tensors under native names (formats/native_config.h, tensor_table.h)
  ExpertQuant quant;    // config.json's quantization_config: the routed experts' packed format (else none)
  std::set<std::string> used;
  std::set<WeightType> matrix_types;

  // Matrices stored as they are in the file are copied into the huge-page arena instead of used in place from the
  // mapping (InferLoadOptions::huge_pages, decided by InferModel::load).
  bool copy_mapped = false;

  // Every converted or copied tensor lives in the model's huge-page arena (core/huge_pages.h).
  template <typename T>
  T* alloc(int64_t n) {
    return m.store_.alloc_array<T>(n);
  }

  // The tensor holding entry `e` in the file (a native name and expert slice, or its legacy name).
  NativeTensorRef ref(const ParamEntry& e) const;

  void check_present(const ParamEntry& e);

  // dtype "int8": the attention and expert matrices int8, the other matrices bf16
  // (as the community's quantized ZAYA1 checkpoints keep them).
  void set_dtype(WeightDtype dtype);

  bool int8_matrix(const ParamEntry& e) const;
  // dtype mxfp4-all: the matrices kept MXFP4 (rows a whole number of 32-blocks): the int8 set (attention
  // projections, experts, LM head) and the router's down projection, the only router matrix as wide as the
  // model; the router's R x R MLP, the grouped conv and an untied embedding (rows gathered, never streamed)
  // stay bf16, as llama.cpp keeps its small and routing tensors at higher precision.
  bool mxfp4_all_matrix(const ParamEntry& e) const;
  // The LM head, or the embedding when it is the tied head.
  bool head_matrix(const ParamEntry& e) const;

  // Float pointer of a tensor held by the in-memory model.
  const float* model_ptr(const std::string& name) const;

  // A small tensor as float32 (a copy from a file, the arena in place otherwise).
  const float* vec(const ParamEntry& e);

  WeightMatrix convert(const float* src, int64_t rows, int64_t cols, WeightType to);

  WeightMatrix mat(const ParamEntry& e);

  // A matrix of the in-memory model (zm), in place where it can be: its float32 view (a bf16 copy under dtype
  // bf16), or, where a frozen LoRA base holds it only as bf16 or as packed rows (model/frozen_base.h: the float32
  // view has no memory), those bf16 values or rows (widened exactly to float32 under dtype f32).
  WeightMatrix model_mat(const ParamEntry& e);

  WeightMatrix file_mat(const ParamEntry& e);
  // A matrix the file holds in the type wanted: `mapped` in place (counted in mapped_matrices), or under copy_mapped
  // a copy in the huge-page arena, the mapping's pages released.
  WeightMatrix as_stored(const WeightMatrix& mapped);
  // Under copy_mapped, drops the whole pages of [p, p + bytes) of the file mapping from this process (read once,
  // copied or converted): the model's resident memory does not hold the file beside its copy.
  void release_mapped(const void* p, int64_t bytes);

  // A routed expert's matrix from a quantized checkpoint (formats/quantized_experts.h), kept packed (kMXFP4 or
  // kFP8), or dequantized to f32 under dtype f32.
  WeightMatrix quantized_expert(const ParamEntry& e);

  // n elements of a float dtype (possibly unaligned) as float32.
  static void decode_f32(SafetensorsDtype dtype, const uint8_t* src, int64_t n, float* dst);

  // The grouped conv [C, d, k1] repacked to [C, k1 d] (see InferAttention::conv_b).
  WeightMatrix conv_b(const ParamEntry& e);

  // Every tensor of the layout (tensor_table.h) into its place.
  void build();

  MergeVectors& merge_at(int n);

  void bind(const ParamEntry& e);

  // Whether `w` is used in place from the file mapping (not an owned copy).
  bool files_hold(const WeightMatrix& w) const;

  // Q8_0 blocks (core/q8_0.h) from the stored values, row by row: the bytes
  // `zaya ckpt export --dtype q8_0` writes for the same values, each row
  // regrouped into the split layout as a Q8_0 file's are.
  void to_int8(WeightMatrix& w);
  // A routed expert's matrix into expert_lowbit rows (core/mxfp4.h's quantizer; FP8: E4M3 with one scale per row,
  // amax / 448, as compressed-tensors' float-quantized channel scheme).
  void to_lowbit(WeightMatrix& w);

  void count_bytes();
};

}  // namespace zaya
