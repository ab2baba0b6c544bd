#pragma once
// Weights for inference: read-only views of every tensor the forward pass
// needs, with the big matrices in float32 or bfloat16.
//
// From a Hugging Face directory (config.json + model.safetensors, or shards +
// model.safetensors.index.json, legacy tensor names of spec §6.1, or the
// native 40-layer layout of formats/native_config.h) the files
// are memory-mapped and, with dtype "auto", every BF16 or F32 matrix is kept
// as stored: copied into huge pages (InferLoadOptions::huge_pages), or, where
// that copy does not fit (ZAYA1-base's 17.7 GB of bf16 weights on a 24 GB
// machine), used in place from the mapping, never widened or copied, pages
// read on first touch and shared through the page cache. The small tensors
// (norms, biases, residual scales, conv weights, temperatures, balancing
// biases) are converted to float32 once (a few MB).
// The grouped convolution is repacked so that each head group's k1 taps are
// one [d, k1 d] matrix (see InferAttention::conv_b).
//
// dtype "bf16" rounds F32 matrices to bf16 (owned copies in the huge-page
// arena, as every copy; halves the bytes a decode step reads) and dtype "f32"
// widens BF16 matrices (owned copies; needs twice the memory). From an in-memory ZayaModel (training weights) the
// f32 arena is used in place, or rounded to bf16 copies.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/core/huge_pages.h"
#include "zaya/infer/matrix_types.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/model/config.h"
#include "zaya/model/lora.h"
#include "zaya/model/model.h"
#include "zaya/ops/matvec.h"

namespace zaya {

// A row-major [rows, cols] matrix in nn.Linear layout [out, in]; an int8 one
// is rows of Q8_0 blocks (core/q8_0.h: an f16 scale per 32 weights).
struct WeightMatrix {
  WeightType type = WeightType::kF32;
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;

  int64_t row_bytes() const { return weight_row_bytes(type, cols); }
  int64_t bytes() const { return rows * row_bytes(); }
  // Rows [r0, r1) (contiguous).
  WeightMatrix row_slice(int64_t r0, int64_t r1) const {
    return {type, static_cast<const uint8_t*>(data) + r0 * row_bytes(), r1 - r0, cols};
  }
  // Row r as float32 (an int8 row dequantized).
  void row_f32(int64_t r, float* dst) const { weight_row_f32(type, data, cols, r, dst); }
};

// Residual scaling of spec §5: res' = (h + hb) * hs + (res + rb) * rs; rs/rb null on half-layer 0.
struct MergeVectors {
  const float* hs_scale_D = nullptr;
  const float* hs_bias_D = nullptr;
  const float* res_scale_D = nullptr;
  const float* res_bias_D = nullptr;
};

struct InferAttention {
  const float* input_norm_D = nullptr;
  MergeVectors merge;
  WeightMatrix q, k, v_cur, v_prev;    // linear_q [Q, D], linear_k [K, D], val_proj1/2 [K/2, D]
  const float* conv_a_w_C2 = nullptr;  // depthwise taps [C, k0] (tap 0 = oldest step; ZAYA1: k0 = 2)
  const float* conv_a_b_C = nullptr;
  // Grouped conv, repacked: row o = (WB[o, :, 0], .., WB[o, :, k1 - 1]), so group g
  // (rows g*d .. g*d+d-1) is a [d, k1 d] matrix applied to (a_0[g], .., a_{k1-1}[g]), oldest first.
  WeightMatrix conv_b;
  const float* conv_b_b_C = nullptr;
  const float* temp_Hk = nullptr;
  WeightMatrix o;  // o_proj [D, Q]
};

struct InferMoe {
  const float* input_norm_D = nullptr;
  MergeVectors merge;
  WeightMatrix down;  // [R, D]
  const float* down_b_R = nullptr;
  const float* states_scale_R = nullptr;  // EDA scale; null on the first MoE half-layer
  const float* eda_norm_R = nullptr;
  WeightMatrix mlp0, mlp2, mlp4;  // [R, R], [R, R], [N, R]
  const float* mlp0_b_R = nullptr;
  const float* mlp2_b_R = nullptr;
  const float* balancing_bias_N = nullptr;
  std::vector<WeightMatrix> fc1;  // per expert [2F, D] (gate rows, then up rows)
  std::vector<WeightMatrix> fc2;  // per expert [D, F]
};

struct InferWeights {
  WeightMatrix embed;    // [V, D]
  WeightMatrix lm_head;  // [V, D]: the embedding when tied, else lm_head.weight
  const float* final_norm_D = nullptr;
  MergeVectors final_merge;
  std::vector<InferAttention> attn;  // one per block
  std::vector<InferMoe> moe;         // one per block
};

// The --dtype help of the inference verbs (generate, serve, eval, score, bench infer): InferLoadOptions::dtype.
inline constexpr const char* kWeightDtypeHelp =
    "weights: auto (as stored, memory-mapped), bf16, f32, int8 (attention, experts and LM head in Q8_0 blocks), "
    "mxfp4 or fp8 (routed experts packed, the rest bf16), int8-mxfp4 or int8-fp8 (those experts beside int8's), "
    "mxfp4-all (llama.cpp-style 4-bit: attention, router down, experts and LM head MXFP4) or mxfp4-all-q8head (its "
    "LM head Q8_0); docs/inference.md";

struct InferLoadOptions {
  // "auto": matrices as stored (BF16 and F32 used in place; a Q8_0 GGUF's
  // Q8_0 tensors as int8); "bf16" or "f32": converted; "int8": the int8 set
  // (zaya_int8_matrix, formats/gguf_zaya_map.h: the attention projections q, k,
  // the two value projections and o, every expert's fc1 and fc2, and the LM
  // head, which is the embedding when tied) in Q8_0 blocks (core/q8_0.h,
  // quantized from the stored values, or taken as they are from a Q8_0 GGUF),
  // and bf16 for the other matrices (router, grouped conv, an untied
  // embedding); vectors (norms, temperatures, residual scales, biases) stay
  // f32, as in the community's quantized ZAYA1 checkpoints. "mxfp4", "fp8",
  // "int8-mxfp4", "int8-fp8": the routed experts packed (beside int8's set);
  // "mxfp4-all" (and "mxfp4-all-q8head", its LM head Q8_0): llama.cpp-style
  // 4-bit, every streamed matrix MXFP4 (infer_model_builder.h, docs/inference.md).
  std::string dtype = "auto";
  // Read every weight page once at load (madvise WILLNEED + touch), so the
  // first tokens do not wait on the disk.
  bool prefetch = false;
  // A Hugging Face directory's matrices that would be used in place from the
  // file mapping (stored in the type wanted) are copied at load into
  // anonymous memory in 2 MiB transparent huge pages (core/huge_pages.h), the
  // mapping released: a decode step streams every weight once, and over
  // 4 KiB file pages it pays a TLB miss every 4 KiB (docs/performance.md,
  // "Decode weights in huge pages"). Kept in place (as with false) when THP is
  // missing or `never`, when the environment sets ZAYA_HUGE_PAGES=0, or when
  // the shards' bytes exceed 3/4 of the memory available (MemAvailable): a
  // model larger than RAM still runs from the page cache. Converted or
  // quantized matrices are in huge pages either way.
  bool huge_pages = true;
  // A LoRA adapter in the PEFT layout (formats/lora_peft.h) applied unmerged
  // (`--lora DIR`, set_lora): the base matrices are not copied or changed,
  // in any dtype (int8 too). Empty: none.
  std::string lora;
};

// Bytes of the weights a forward pass reads for one token, split as the
// roofline of `zaya bench infer` needs them.
struct WeightBytes {
  int64_t dense = 0;       // attention, routers, conv, norms: read every step
  int64_t attention = 0;   // of dense: every block's attention (projections, conv, its vectors)
  int64_t router = 0;      // of dense: every block's router and MoE vectors
  int64_t per_expert = 0;  // fc1 + fc2 of one expert of one layer
  int64_t lm_head = 0;     // the LM head (the tied embedding, or lm_head.weight)
  int64_t total = 0;       // every weight held
};

class InferModel {
 public:
  // Loads a Hugging Face directory; errors name the file, tensor, shape or dtype.
  static std::unique_ptr<InferModel> load(const std::string& dir, const InferLoadOptions& options = {});
  // A training checkpoint directory (step_XXXXXXXX with metadata.json,
  // docs/checkpoints.md): its f32 weights are read into memory (the format is
  // not mappable in place), then used as from_model does.
  static std::unique_ptr<InferModel> load_checkpoint(const std::string& dir, const InferLoadOptions& options = {});
  // A zaya GGUF file (`zaya ckpt export`, docs/formats-gguf.md): its weights
  // are read into memory (the file stacks each layer's experts, gate and up
  // halves apart, so its matrices cannot be used in place), then used as
  // from_model does; dtype "auto" gives bf16 matrices for a BF16 file, else
  // f32. A GGUF file of another tool or architecture is refused, saying what is
  // read. A Q8_0 file (`zaya ckpt export --dtype q8_0`) gives, with dtype
  // "auto" or "int8", its Q8_0 tensors as int8 matrices, copied block for
  // block (never widened), and bf16 for the rest; with "bf16" or "f32" the
  // Q8_0 tensors are dequantized. tokenizer_hint() is the file itself when it embeds its tokenizer
  // (data/tokenizer_gguf.h), else the tokenizer.model beside it if there is
  // one, else the file again (loading it then says how to give a tokenizer).
  static std::unique_ptr<InferModel> load_gguf(const std::string& path, const InferLoadOptions& options = {});
  // Any of the three: a GGUF file when `path` is a file, a checkpoint when
  // PATH/metadata.json exists, else a Hugging Face directory.
  static std::unique_ptr<InferModel> open(const std::string& path, const InferLoadOptions& options = {});
  // Views of (or bf16 copies from) a model held in memory; `model` must outlive the result.
  // dtype: "auto"/"f32" (the f32 arena in place) or "bf16".
  static std::unique_ptr<InferModel> from_model(const ZayaModel& model, const std::string& dtype = "auto");
  // The same weights run under `config`, which may differ from the model's own only in the attention pattern
  // (sliding_window, sliding_blocks and the RoPE bases: no tensor changes), e.g. a full-attention model run with
  // a window, or sliding-window inference before the training side builds such a model.
  static std::unique_ptr<InferModel> from_model(const ZayaModel& model, const ZayaConfig& config,
                                                const std::string& dtype = "auto");

  // A LoRA adapter (a model of this config) that the engine applies
  // unmerged: each adapted attention projection computes x W^T + alpha /
  // rank * (x A^T) B^T (ops/lora_linear.h), the base matrices stay as they
  // are (bf16, f32 or int8, shared with the file mapping). Null: none.
  void set_lora(std::unique_ptr<LoraAdapters> adapters);
  const LoraAdapters* lora() const { return lora_.get(); }

  InferModel(const InferModel&) = delete;
  InferModel& operator=(const InferModel&) = delete;

  const ZayaConfig& config() const { return config_; }
  const InferWeights& weights() const { return weights_; }
  // The dtype of the big matrices: "bf16", "f32" or "mixed"; "int8+bf16" for
  // dtype int8 (int8 attention and experts, the rest bf16).
  const std::string& matrix_dtype() const { return matrix_dtype_; }
  // The same as an enum: what decisions test (engine.cc's KV cache type).
  const MatrixTypes& matrix_types() const { return matrix_types_; }
  const WeightBytes& weight_bytes() const { return bytes_; }
  // Where the weights came from (a directory, or "memory").
  const std::string& source() const { return source_; }
  // The tokenizer a training checkpoint's config names (data.tokenizer), or
  // a GGUF file's (load_gguf), else empty.
  const std::string& tokenizer_hint() const { return tokenizer_hint_; }
  // "native" for the 40-layer layout of ZAYA1-8B and later (formats/native_config.h), else "legacy".
  const char* layout() const { return native_ ? "native" : "legacy"; }
  // Matrices used straight from the file mapping, and their bytes.
  int64_t mapped_matrices() const { return mapped_matrices_; }
  int64_t mapped_bytes() const { return mapped_bytes_; }

 private:
  InferModel() = default;
  struct Builder;

  ZayaConfig config_;
  InferWeights weights_;
  std::string matrix_dtype_, source_, tokenizer_hint_;
  MatrixTypes matrix_types_;
  std::unique_ptr<ZayaModel> held_;  // weights read from a training checkpoint or a GGUF file
  WeightBytes bytes_;
  int64_t mapped_matrices_ = 0, mapped_bytes_ = 0;
  bool native_ = false;
  std::optional<SafetensorsDir> files_;  // keeps the mapping alive
  HugePageArena store_;                  // converted or copied matrices and small tensors
  std::unique_ptr<LoraAdapters> lora_;   // applied unmerged by the engine (null: none)
};

// Why `adapters` cannot apply to a model of config `model` (its targets'
// shapes, blocks or experts differ), or "" when they can.
std::string lora_mismatch(const ZayaConfig& model, const LoraAdapters& adapters);
// A PEFT adapter directory (formats/lora_peft.h) read for a model of config
// `model`; fails naming the directory when it does not fit (lora_mismatch).
std::unique_ptr<LoraAdapters> load_lora_adapter(const std::string& dir, const ZayaConfig& model);

// Validates a dtype option: "auto", "bf16", "f32" or "int8" (the message names `flag`).
void check_weight_dtype_option(const std::string& dtype, const std::string& flag);

}  // namespace zaya
