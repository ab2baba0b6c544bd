// InferModel::Builder's conversions and binding (infer_model_builder.h).
#include "zaya/infer/infer_model_builder.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/core/bf16.h"
#include "zaya/core/enum_names.h"
#include "zaya/core/error.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/q8_0.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/formats/native_config.h"
#include "zaya/io/gguf_vocab.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/model/config_toml.h"
#include "zaya/model/frozen_base.h"
#include "zaya/model/params.h"
#include "zaya/ops/quant_linear.h"

namespace zaya {

NativeTensorRef InferModel::Builder::ref(const ParamEntry& e) const {
  return native ? native_tensor_ref(e.role, e.half_layer, e.expert, m.config_) : NativeTensorRef{e.name, -1};
}

void InferModel::Builder::check_present(const ParamEntry& e) {
  const NativeTensorRef r = ref(e);
  const std::vector<int64_t>& shape = e.shape;
  used.insert(r.name);
  if (st != nullptr)
    ZAYA_CHECK(st->has(r.name), "{}: missing tensor '{}' (shape {}); the checkpoint does not match config.json", label,
               r.name,
               format_shape(r.expert >= 0 ? std::vector<int64_t>{m.config_.experts, shape[0], shape[1]} : shape));
}

void InferModel::Builder::set_dtype(WeightDtype dtype) {
  all_mxfp4 = dtype == WeightDtype::kMxfp4All || dtype == WeightDtype::kMxfp4AllQ8Head;
  head_q8 = dtype == WeightDtype::kMxfp4AllQ8Head;
  // mxfp4-all-q8head: the int8 rule meets only the head (mat() gives every other int8-set matrix to MXFP4 first).
  int8 = dtype == WeightDtype::kInt8 || dtype == WeightDtype::kInt8Mxfp4 || dtype == WeightDtype::kInt8Fp8 || head_q8;
  expert_lowbit = dtype == WeightDtype::kMxfp4 || dtype == WeightDtype::kInt8Mxfp4 || all_mxfp4 ? WeightType::kMXFP4
                  : dtype == WeightDtype::kFp8 || dtype == WeightDtype::kInt8Fp8                ? WeightType::kFP8
                                                                                                : WeightType::kF32;
  want = int8 || expert_lowbit != WeightType::kF32 ? WeightDtype::kBF16 : dtype;
}

bool InferModel::Builder::int8_matrix(const ParamEntry& e) const {
  return e.shape.size() == 2 && zaya_int8_matrix(e.role, e.shape[1], m.config_.tie_word_embeddings);
}

bool InferModel::Builder::mxfp4_all_matrix(const ParamEntry& e) const {
  return int8_matrix(e) || (e.role == TensorRole::kRouterDown && e.shape.size() == 2 && e.shape[1] % kMxBlock == 0);
}

bool InferModel::Builder::head_matrix(const ParamEntry& e) const {
  return e.role == TensorRole::kLmHead || (e.role == TensorRole::kEmbedding && m.config_.tie_word_embeddings);
}

const float* InferModel::Builder::model_ptr(const std::string& name) const {
  if (const ParamEntry* e = zm->params().find(name)) return zm->param_data() + e->offset;
  if (const ParamEntry* e = zm->buffers().find(name)) return zm->buffer_data() + e->offset;
  fail("{}: the model holds no tensor '{}' (inference needs every expert of every layer)", label, name);
}

const float* InferModel::Builder::vec(const ParamEntry& e) {
  check_present(e);
  if (zm != nullptr) return model_ptr(e.name);
  float* dst = alloc<float>(e.numel);
  st->read_f32(ref(e).name, dst, e.shape);
  return dst;
}

WeightMatrix InferModel::Builder::convert(const float* src, int64_t rows, int64_t cols, WeightType to) {
  const int64_t n = rows * cols;
  if (to == WeightType::kBF16) {
    uint16_t* dst = alloc<uint16_t>(n);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
    return {to, dst, rows, cols};
  }
  float* dst = alloc<float>(n);
  std::memcpy(dst, src, sizeof(float) * n);
  return {to, dst, rows, cols};
}

WeightMatrix InferModel::Builder::mat(const ParamEntry& e) {
  if (quant.quantized() && st != nullptr && (e.role == TensorRole::kExpertFc1 || e.role == TensorRole::kExpertFc2))
    return quantized_expert(e);
  check_present(e);
  const int64_t rows = e.shape[0], cols = e.shape[1];
  if (q8_file != nullptr && q8_file->is_q8_0(e.name)) {  // the file's blocks, each row regrouped (core/q8_0.h)
    const int64_t row_bytes = q8_0_row_bytes(cols);
    uint8_t* dst = alloc<uint8_t>(rows * row_bytes);
    q8_file->read_legacy_q8_0(e.name, dst, e.shape);
    std::vector<uint8_t> blocks(static_cast<size_t>(row_bytes));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(blocks.data(), dst + r * row_bytes, size_t(row_bytes));
      q8_0_blocks_to_split(blocks.data(), cols, dst + r * row_bytes);
    }
    matrix_types.insert(WeightType::kI8);
    return {WeightType::kI8, dst, rows, cols};
  }
  // An int8 matrix is quantized from the stored values (no bf16 copy on the way).
  const bool expert = e.role == TensorRole::kExpertFc1 || e.role == TensorRole::kExpertFc2;
  const bool lowbit = expert_lowbit != WeightType::kF32 && e.shape[1] % 32 == 0 &&
                      (expert || (all_mxfp4 && mxfp4_all_matrix(e) && !(head_q8 && head_matrix(e))));
  const bool quantize = (int8 && int8_matrix(e)) || lowbit;
  const WeightDtype keep = want;
  const bool keep_copy = copy_mapped;
  if (quantize) {  // quantized from the mapping, never copied first
    want = WeightDtype::kAuto;
    copy_mapped = false;
  }
  WeightMatrix w;
  if (zm != nullptr) {
    w = model_mat(e);
  } else {
    w = file_mat(e);
  }
  want = keep;
  copy_mapped = keep_copy;
  if (quantize) {
    const WeightMatrix stored = w;
    lowbit ? to_lowbit(w) : to_int8(w);
    if (stored.data != nullptr && files_hold(stored)) {  // the mapped original is not used any more
      --m.mapped_matrices_;
      m.mapped_bytes_ -= stored.bytes();
      release_mapped(stored.data, stored.bytes());
    }
  }
  matrix_types.insert(w.type);
  return w;
}

WeightMatrix InferModel::Builder::model_mat(const ParamEntry& e) {
  const int64_t rows = e.shape[0], cols = e.shape[1];
  const float* p = model_ptr(e.name);
  WeightMatrix held{WeightType::kF32, p, rows, cols};
  const QuantWeights* q = zm->quant_weights();
  if (q != nullptr && zm->holds_packed(e, q->type))
    held = {q->type, q->rows_of(p, cols), rows, cols};
  else if (zm->storage() == ParamStorage::kFrozenBf16 && bf16_only_role(e.role))
    held = {WeightType::kBF16, zm->bf16_weights()->copy_of(p), rows, cols};
  ZAYA_ASSERT(held.data != nullptr);
  if (held.type == WeightType::kF32)
    return want == WeightDtype::kBF16 ? convert(p, rows, cols, WeightType::kBF16) : held;
  if (want != WeightDtype::kF32) return held;  // bf16 or packed rows, read in place
  float* f = alloc<float>(rows * cols);        // dtype f32: their exact values widened
  for (int64_t i = 0; i < rows; ++i) held.row_f32(i, f + i * cols);
  return {WeightType::kF32, f, rows, cols};
}

WeightMatrix InferModel::Builder::file_mat(const ParamEntry& e) {
  const int64_t rows = e.shape[0], cols = e.shape[1];
  const NativeTensorRef r = ref(e);
  const std::string& name = r.name;
  const SafetensorsTensorInfo& info = st->info(name);
  const std::string& path = st->file_of(name).path();
  const std::vector<int64_t> want_shape =
      r.expert >= 0 ? std::vector<int64_t>{m.config_.experts, rows, cols} : std::vector<int64_t>{rows, cols};
  if (info.shape != want_shape)
    fail("{}: tensor '{}': expected shape {}, found {}", path, name, format_shape(want_shape),
         format_shape(info.shape));
  const int64_t n = rows * cols;
  const int64_t slice = r.expert >= 0 ? r.expert : 0;  // the expert's matrix inside a stacked tensor
  const uint8_t* bytes = st->bytes(name).data() + slice * n * int64_t(dtype_size(info.dtype));
  const auto addr = reinterpret_cast<uintptr_t>(bytes);
  switch (info.dtype) {
    case SafetensorsDtype::kBF16:
      if (want != WeightDtype::kF32 && addr % 2 == 0) return as_stored({WeightType::kBF16, bytes, rows, cols});
      break;
    case SafetensorsDtype::kF32:
      if (want != WeightDtype::kBF16 && addr % 4 == 0) return as_stored({WeightType::kF32, bytes, rows, cols});
      break;
    case SafetensorsDtype::kF16:
    case SafetensorsDtype::kF64: break;
    default:
      fail("{}: tensor '{}' has dtype {}; weight matrices must be BF16, F32, F16 or F64", path, name,
           dtype_name(info.dtype));
  }
  // Converted (or merely realigned) copy.
  const WeightType to = want == WeightDtype::kF32               ? WeightType::kF32
                        : want == WeightDtype::kBF16            ? WeightType::kBF16
                        : info.dtype == SafetensorsDtype::kBF16 ? WeightType::kBF16
                                                                : WeightType::kF32;
  if (to == WeightType::kBF16 && info.dtype == SafetensorsDtype::kBF16) {
    uint16_t* dst = alloc<uint16_t>(n);
    std::memcpy(dst, bytes, 2 * size_t(n));
    release_mapped(bytes, 2 * n);
    return {to, dst, rows, cols};
  }
  std::vector<float> tmp(n);
  decode_f32(info.dtype, bytes, n, tmp.data());
  release_mapped(bytes, n * int64_t(dtype_size(info.dtype)));
  return convert(tmp.data(), rows, cols, to);
}

WeightMatrix InferModel::Builder::as_stored(const WeightMatrix& mapped) {
  if (!copy_mapped) {
    ++m.mapped_matrices_;
    m.mapped_bytes_ += mapped.bytes();
    return mapped;
  }
  uint8_t* dst = alloc<uint8_t>(mapped.bytes());
  std::memcpy(dst, mapped.data, size_t(mapped.bytes()));
  release_mapped(mapped.data, mapped.bytes());
  return {mapped.type, dst, mapped.rows, mapped.cols};
}

void InferModel::Builder::release_mapped(const void* p, int64_t bytes) {
  if (!copy_mapped) return;
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + uintptr_t(bytes)) / page * page;
  // Drops this process's view of those pages (they stay in the page cache); a later read faults them in again.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

WeightMatrix InferModel::Builder::quantized_expert(const ParamEntry& e) {
  ZAYA_CHECK(native, "{}: quantized experts ({}) are read from the native layout only; config.json is legacy", label,
             quant.description());
  const NativeTensorRef r = ref(e);
  const int64_t rows = e.shape[0], cols = e.shape[1];
  const WeightType type = quant.weight_type();
  uint8_t* dst = alloc<uint8_t>(rows * weight_row_bytes(type, cols));
  read_quantized_expert(*st, quant, r.name, m.config_.experts, r.expert, rows, cols, dst, used);
  WeightMatrix w{type, dst, rows, cols};
  if (want == WeightDtype::kF32) {  // the exact dequantized values
    float* f = alloc<float>(rows * cols);
    for (int64_t i = 0; i < rows; ++i) w.row_f32(i, f + i * cols);
    w = {WeightType::kF32, f, rows, cols};
  }
  matrix_types.insert(w.type);
  return w;
}

void InferModel::Builder::decode_f32(SafetensorsDtype dtype, const uint8_t* src, int64_t n, float* dst) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case SafetensorsDtype::kBF16: {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        dst[i] = bf16_to_float(v);
        break;
      }
      case SafetensorsDtype::kF16: {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        dst[i] = f16_to_float(v);
        break;
      }
      case SafetensorsDtype::kF64: {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        dst[i] = float(v);
        break;
      }
      default: std::memcpy(dst + i, src + 4 * i, 4); break;
    }
  }
}

WeightMatrix InferModel::Builder::conv_b(const ParamEntry& e) {
  const int64_t C = e.shape[0], d = e.shape[1], k1 = e.shape[2];
  check_present(e);
  std::vector<float> wb(C * d * k1);
  WeightType to = WeightType::kF32;
  if (zm != nullptr) {
    std::memcpy(wb.data(), model_ptr(e.name), sizeof(float) * wb.size());
    if (want == WeightDtype::kBF16) to = WeightType::kBF16;
  } else {
    const std::string file_name = ref(e).name;
    st->read_f32(file_name, wb.data(), {C, d, k1});
    const SafetensorsDtype stored = st->info(file_name).dtype;
    if (want == WeightDtype::kBF16 || (want == WeightDtype::kAuto && stored == SafetensorsDtype::kBF16))
      to = WeightType::kBF16;
  }
  std::vector<float> packed(C * k1 * d);
  for (int64_t o = 0; o < C; ++o)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t m = 0; m < k1; ++m) packed[(o * k1 + m) * d + i] = wb[(o * d + i) * k1 + m];
  return convert(packed.data(), C, k1 * d, to);
}

void InferModel::Builder::build() {
  const ZayaConfig& c = m.config_;
  InferWeights& w = m.weights_;
  w.attn.resize(size_t(c.num_blocks));
  w.moe.resize(size_t(c.num_blocks));
  for (InferMoe& mo : w.moe) {
    mo.fc1.resize(size_t(c.experts));
    mo.fc2.resize(size_t(c.experts));
  }
  const ParamTable params(c, true), buffers(c, false);
  for (const ParamTable* table : {&params, &buffers})
    for (const ParamEntry& e : table->entries()) bind(e);
  if (c.tie_word_embeddings) m.weights_.lm_head = m.weights_.embed;
  if (st != nullptr) {
    // The same strictness as the training loader: anything else is a sign of a wrong config.json.
    for (const std::string& name : st->names()) {
      if (used.count(name) || (c.tie_word_embeddings && name == "lm_head.weight")) continue;  // tied (spec §6.1)
      fail("{}: unexpected tensor '{}' (not part of the layout config.json describes; wrong config.json?)", label,
           name);
    }
  }
  std::set<WeightType> rest = matrix_types;
  rest.erase(WeightType::kI8);
  rest.erase(WeightType::kMXFP4);
  rest.erase(WeightType::kFP8);
  m.matrix_types_.floats = rest.size() > 1                 ? FloatMatrices::kMixed
                           : rest.count(WeightType::kBF16) ? FloatMatrices::kBF16
                                                           : FloatMatrices::kF32;
  m.matrix_types_.int8 = matrix_types.count(WeightType::kI8) != 0;
  // FP8 first: under mxfp4-all, a checkpoint's FP8 experts stay FP8 beside the MXFP4 matrices.
  m.matrix_types_.experts = matrix_types.count(WeightType::kFP8)     ? "fp8"
                            : matrix_types.count(WeightType::kMXFP4) ? "mxfp4"
                                                                     : "";
  m.matrix_dtype_ = m.matrix_types_.name();
  if (all_mxfp4 && matrix_types.count(WeightType::kMXFP4)) {  // "mxfp4-all+bf16", "mxfp4-all+fp8-experts+bf16"
    MatrixTypes rest_types = m.matrix_types_;
    if (rest_types.experts == "mxfp4") rest_types.experts.clear();
    m.matrix_dtype_ = "mxfp4-all+" + rest_types.name();
  }
  count_bytes();
}

MergeVectors& InferModel::Builder::merge_at(int n) {
  InferWeights& w = m.weights_;
  if (n < 0) return w.final_merge;
  return n % 2 == 0 ? w.attn[size_t(n / 2)].merge : w.moe[size_t(n / 2)].merge;
}

void InferModel::Builder::bind(const ParamEntry& e) {
  InferWeights& w = m.weights_;
  InferAttention& at = w.attn[size_t(std::max(e.half_layer, 0) / 2)];
  InferMoe& mo = w.moe[size_t(std::max(e.half_layer, 0) / 2)];
  switch (e.role) {
    case TensorRole::kEmbedding: w.embed = mat(e); break;
    case TensorRole::kFinalNorm: w.final_norm_D = vec(e); break;
    case TensorRole::kLmHead: w.lm_head = mat(e); break;
    case TensorRole::kMergeHiddenScale: merge_at(e.half_layer).hs_scale_D = vec(e); break;
    case TensorRole::kMergeHiddenBias: merge_at(e.half_layer).hs_bias_D = vec(e); break;
    case TensorRole::kMergeResidualScale: merge_at(e.half_layer).res_scale_D = vec(e); break;
    case TensorRole::kMergeResidualBias: merge_at(e.half_layer).res_bias_D = vec(e); break;
    case TensorRole::kAttnNorm: at.input_norm_D = vec(e); break;
    case TensorRole::kAttnQ: at.q = mat(e); break;
    case TensorRole::kAttnK: at.k = mat(e); break;
    case TensorRole::kAttnVCurrent: at.v_cur = mat(e); break;
    case TensorRole::kAttnVDelayed: at.v_prev = mat(e); break;
    case TensorRole::kConvDepthwise: at.conv_a_w_C2 = vec(e); break;
    case TensorRole::kConvDepthwiseBias: at.conv_a_b_C = vec(e); break;
    case TensorRole::kConvGrouped: at.conv_b = conv_b(e); break;
    case TensorRole::kConvGroupedBias: at.conv_b_b_C = vec(e); break;
    case TensorRole::kKeyTemperature: at.temp_Hk = vec(e); break;
    case TensorRole::kAttnOut: at.o = mat(e); break;
    case TensorRole::kMoeNorm: mo.input_norm_D = vec(e); break;
    case TensorRole::kRouterDown: mo.down = mat(e); break;
    case TensorRole::kRouterDownBias: mo.down_b_R = vec(e); break;
    case TensorRole::kRouterStateScale: mo.states_scale_R = vec(e); break;
    case TensorRole::kRouterNorm: mo.eda_norm_R = vec(e); break;
    case TensorRole::kRouterFc1: mo.mlp0 = mat(e); break;
    case TensorRole::kRouterFc1Bias: mo.mlp0_b_R = vec(e); break;
    case TensorRole::kRouterFc2: mo.mlp2 = mat(e); break;
    case TensorRole::kRouterFc2Bias: mo.mlp2_b_R = vec(e); break;
    case TensorRole::kRouterOut: mo.mlp4 = mat(e); break;
    case TensorRole::kBalancingBias: mo.balancing_bias_N = vec(e); break;
    case TensorRole::kExpertFc1: mo.fc1[size_t(e.expert)] = mat(e); break;
    case TensorRole::kExpertFc2: mo.fc2[size_t(e.expert)] = mat(e); break;
  }
}

bool InferModel::Builder::files_hold(const WeightMatrix& w) const { return st != nullptr && !m.store_.holds(w.data); }

void InferModel::Builder::to_int8(WeightMatrix& w) {
  if (w.type == WeightType::kI8 || w.rows == 0) return;
  ZAYA_ASSERT(w.cols % kQ8Block == 0);
  const int64_t row_bytes = q8_0_row_bytes(w.cols);
  uint8_t* q = alloc<uint8_t>(w.rows * row_bytes);
#pragma omp parallel
  {
    std::vector<float> row(size_t(w.cols));
    std::vector<uint8_t> blocks(static_cast<size_t>(row_bytes));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < w.rows; ++r) {
      w.row_f32(r, row.data());
      quantize_q8_0(row.data(), w.cols, blocks.data());
      q8_0_blocks_to_split(blocks.data(), w.cols, q + r * row_bytes);
    }
  }
  w = {WeightType::kI8, q, w.rows, w.cols};
}

void InferModel::Builder::to_lowbit(WeightMatrix& w) {
  if (w.type == expert_lowbit || w.rows == 0) return;
  const WeightType t = expert_lowbit;
  const int64_t row_bytes = weight_row_bytes(t, w.cols);
  uint8_t* q = alloc<uint8_t>(w.rows * row_bytes);
#pragma omp parallel
  {
    std::vector<float> row(size_t(w.cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < w.rows; ++r) {
      w.row_f32(r, row.data());
      quantize_weight_row(t, row.data(), w.cols, q + r * row_bytes);  // as a quantized LoRA base holds them
    }
  }
  w = {t, q, w.rows, w.cols};
}

void InferModel::Builder::count_bytes() {
  const ZayaConfig& c = m.config_;
  const InferWeights& w = m.weights_;
  const int64_t D = c.hidden, C = c.conv_channels(), R = c.router_hidden, N = c.router_slots();
  WeightBytes& b = m.bytes_;
  b = {};
  for (const InferAttention& a : w.attn) {
    b.attention += a.q.bytes() + a.k.bytes() + a.v_cur.bytes() + a.v_prev.bytes() + a.conv_b.bytes() + a.o.bytes();
    b.attention += 4 * (5 * D + (c.conv_kernel0 + 1) * C + C + c.kv_heads);  // norm, merge, conv A, conv B bias, temp
  }
  for (const InferMoe& mo : w.moe) {
    b.router += mo.down.bytes() + mo.mlp0.bytes() + mo.mlp2.bytes() + mo.mlp4.bytes();
    b.router += 4 * (5 * D + 6 * R + N);
  }
  b.dense = b.attention + b.router;
  b.dense += 4 * 5 * D;
  if (!w.moe.empty()) b.per_expert = w.moe[0].fc1[0].bytes() + w.moe[0].fc2[0].bytes();
  b.lm_head = w.lm_head.bytes();
  b.total = b.dense + b.lm_head + b.per_expert * c.experts * c.num_blocks;
  if (!c.tie_word_embeddings) b.total += w.embed.bytes();  // the embedding is held beside the head
}

}  // namespace zaya
