#include "zaya/infer/infer_model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "zaya/ckpt/reader.h"
#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/infer/native_layout.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/model/hf_config.h"
#include "zaya/model/params.h"
#include "zaya/train/train_config.h"

namespace zaya {

void check_weight_dtype_option(const std::string& dtype, const std::string& flag) {
  ZAYA_CHECK(dtype == "auto" || dtype == "bf16" || dtype == "f32", "{} '{}' is invalid; allowed: auto, bf16, f32", flag,
             dtype);
}

// Binds every tensor of the layout (spec §6.1), from either a safetensors
// directory or a ZayaModel, converting where the requested dtype says so.
struct InferModel::Builder {
  explicit Builder(InferModel& model) : m(model) {}
  InferModel& m;
  const SafetensorsDir* st = nullptr;
  const ZayaModel* zm = nullptr;
  std::string want;  // auto, bf16, f32
  std::string label;
  bool native = false;  // tensors under native names (native_layout.h)
  std::set<std::string> used;
  std::set<WeightType> matrix_types;

  template <typename T>
  T* alloc(int64_t n) {
    m.owned_.push_back(aligned_alloc_array<uint8_t>(size_t(n) * sizeof(T)));
    return reinterpret_cast<T*>(m.owned_.back().get());
  }

  // The tensor holding legacy tensor `name` in the file (a native name and expert slice, or itself).
  NativeTensorRef ref(const std::string& name) const {
    return native ? native_tensor_for(name, m.config_) : NativeTensorRef{name, -1};
  }

  void check_present(const std::string& name, const std::vector<int64_t>& shape) {
    const NativeTensorRef r = ref(name);
    used.insert(r.name);
    if (st != nullptr)
      ZAYA_CHECK(st->has(r.name), "{}: missing tensor '{}' (shape {}); the checkpoint does not match config.json",
                 label, r.name,
                 format_shape(r.expert >= 0 ? std::vector<int64_t>{m.config_.experts, shape[0], shape[1]} : shape));
  }

  // Float pointer of a tensor held by the in-memory model.
  const float* model_ptr(const std::string& name) const {
    if (const ParamEntry* e = zm->params().find(name)) return zm->param_data() + e->offset;
    if (const ParamEntry* e = zm->buffers().find(name)) return zm->buffer_data() + e->offset;
    fail("{}: the model holds no tensor '{}' (inference needs every expert of every layer)", label, name);
  }

  // A small tensor as float32 (a copy from a file, the arena in place otherwise).
  const float* vec(const std::string& name, const std::vector<int64_t>& shape) {
    check_present(name, shape);
    if (zm != nullptr) return model_ptr(name);
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    float* dst = alloc<float>(n);
    st->read_f32(ref(name).name, dst, shape);
    return dst;
  }
  const float* maybe_vec(const std::string& name, const std::vector<int64_t>& shape, bool present) {
    return present ? vec(name, shape) : nullptr;
  }

  WeightMatrix convert(const float* src, int64_t rows, int64_t cols, WeightType to) {
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

  WeightMatrix mat(const std::string& name, int64_t rows, int64_t cols) {
    check_present(name, {rows, cols});
    WeightMatrix w;
    if (zm != nullptr) {
      const float* p = model_ptr(name);
      w = want == "bf16" ? convert(p, rows, cols, WeightType::kBF16) : WeightMatrix{WeightType::kF32, p, rows, cols};
    } else {
      w = file_mat(name, rows, cols);
    }
    matrix_types.insert(w.type);
    return w;
  }

  WeightMatrix file_mat(const std::string& legacy_name, int64_t rows, int64_t cols) {
    const NativeTensorRef r = ref(legacy_name);
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
        if (want != "f32" && addr % 2 == 0) {
          ++m.mapped_matrices_;
          m.mapped_bytes_ += 2 * n;
          return {WeightType::kBF16, bytes, rows, cols};
        }
        break;
      case SafetensorsDtype::kF32:
        if (want != "bf16" && addr % 4 == 0) {
          ++m.mapped_matrices_;
          m.mapped_bytes_ += 4 * n;
          return {WeightType::kF32, bytes, rows, cols};
        }
        break;
      case SafetensorsDtype::kF16:
      case SafetensorsDtype::kF64: break;
      default:
        fail("{}: tensor '{}' has dtype {}; weight matrices must be BF16, F32, F16 or F64", path, name,
             dtype_name(info.dtype));
    }
    // Converted (or merely realigned) copy.
    const WeightType to = want == "f32"                           ? WeightType::kF32
                          : want == "bf16"                        ? WeightType::kBF16
                          : info.dtype == SafetensorsDtype::kBF16 ? WeightType::kBF16
                                                                  : WeightType::kF32;
    if (to == WeightType::kBF16 && info.dtype == SafetensorsDtype::kBF16) {
      uint16_t* dst = alloc<uint16_t>(n);
      std::memcpy(dst, bytes, 2 * size_t(n));
      return {to, dst, rows, cols};
    }
    std::vector<float> tmp(n);
    decode_f32(info.dtype, bytes, n, tmp.data());
    return convert(tmp.data(), rows, cols, to);
  }

  // n elements of a float dtype (possibly unaligned) as float32.
  static void decode_f32(SafetensorsDtype dtype, const uint8_t* src, int64_t n, float* dst) {
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

  // The grouped conv [C, d, 2] repacked to [C, 2d] (see InferAttention::conv_b).
  WeightMatrix conv_b(const std::string& name, int64_t C, int64_t d) {
    check_present(name, {C, d, 2});
    std::vector<float> wb(C * d * 2);
    WeightType to = WeightType::kF32;
    if (zm != nullptr) {
      std::memcpy(wb.data(), model_ptr(name), sizeof(float) * wb.size());
      if (want == "bf16") to = WeightType::kBF16;
    } else {
      const std::string file_name = ref(name).name;
      st->read_f32(file_name, wb.data(), {C, d, 2});
      const SafetensorsDtype stored = st->info(file_name).dtype;
      if (want == "bf16" || (want == "auto" && stored == SafetensorsDtype::kBF16)) to = WeightType::kBF16;
    }
    std::vector<float> packed(C * 2 * d);
    for (int64_t o = 0; o < C; ++o)
      for (int64_t i = 0; i < d; ++i) {
        packed[o * 2 * d + i] = wb[(o * d + i) * 2 + 0];
        packed[o * 2 * d + d + i] = wb[(o * d + i) * 2 + 1];
      }
    return convert(packed.data(), C, 2 * d, to);
  }

  MergeVectors merge(const std::string& p, int64_t D, bool with_residual) {
    MergeVectors v;
    v.hs_scale_D = vec(p + "res_scale.hidden_states_scale", {D});
    v.hs_bias_D = vec(p + "res_scale.hidden_states_bias", {D});
    if (with_residual) {
      v.res_scale_D = vec(p + "res_scale.residual_scale", {D});
      v.res_bias_D = vec(p + "res_scale.residual_bias", {D});
    }
    return v;
  }

  void build() {
    const ZayaConfig& c = m.config_;
    const int64_t D = c.hidden, Q = c.q_width(), K = c.kv_width(), C = c.conv_channels(), d = c.head_dim;
    const int64_t R = c.router_hidden, N = c.router_slots(), F = c.expert_ffn;
    InferWeights& w = m.weights_;
    w.embed = mat("model.embed_tokens.weight", c.vocab_size, D);
    for (int n = 0; n < c.half_layers(); ++n) {
      const std::string p = layer_prefix(n);
      if (n % 2 == 0) {
        const std::string a = p + "self_attn.";
        InferAttention at;
        at.input_norm_D = vec(p + "input_norm.weight", {D});
        at.merge = merge(p, D, n > 0);
        at.q = mat(a + "qkv.linear_q.weight", Q, D);
        at.k = mat(a + "qkv.linear_k.weight", K, D);
        at.v_cur = mat(a + "qkv.val_proj1.weight", c.value_stream_width(), D);
        at.v_prev = mat(a + "qkv.val_proj2.weight", c.value_stream_width(), D);
        at.conv_a_w_C2 = vec(a + "qkv.conv_qk.0.weight", {C, 1, 2});
        at.conv_a_b_C = vec(a + "qkv.conv_qk.0.bias", {C});
        at.conv_b = conv_b(a + "qkv.conv_qk.1.weight", C, d);
        at.conv_b_b_C = vec(a + "qkv.conv_qk.1.bias", {C});
        at.temp_Hk = vec(a + "qkv.temp", {c.kv_heads});
        at.o = mat(a + "o_proj.weight", D, Q);
        w.attn.push_back(std::move(at));
      } else {
        const std::string r = p + "zaya_block.router.";
        const std::string x = p + "zaya_block.experts.local_experts.";
        InferMoe mo;
        mo.input_norm_D = vec(p + "input_norm.weight", {D});
        mo.merge = merge(p, D, true);
        mo.down = mat(r + "down_proj.weight", R, D);
        mo.down_b_R = vec(r + "down_proj.bias", {R});
        mo.states_scale_R = maybe_vec(r + "router_states_scale", {R}, c.use_eda && n > 1);
        mo.eda_norm_R = vec(r + "rmsnorm_eda.weight", {R});
        mo.mlp0 = mat(r + "router_mlp.0.weight", R, R);
        mo.mlp0_b_R = vec(r + "router_mlp.0.bias", {R});
        mo.mlp2 = mat(r + "router_mlp.2.weight", R, R);
        mo.mlp2_b_R = vec(r + "router_mlp.2.bias", {R});
        mo.mlp4 = mat(r + "router_mlp.4.weight", N, R);
        mo.balancing_bias_N = vec(r + "balancing_biases", {N});
        for (int64_t e = 0; e < c.experts; ++e) {
          mo.fc1.push_back(mat(x + std::to_string(e) + ".linear_fc1.weight", 2 * F, D));
          mo.fc2.push_back(mat(x + std::to_string(e) + ".linear_fc2.weight", D, F));
        }
        w.moe.push_back(std::move(mo));
      }
    }
    w.final_norm_D = vec("model.final_norm.weight", {D});
    w.final_merge = merge("model.", D, true);

    if (st != nullptr) {
      // The same strictness as the training loader: anything else is a sign of a wrong config.json.
      for (const std::string& name : st->names()) {
        if (used.count(name) || name == "lm_head.weight") continue;  // lm_head is tied (spec §6.1)
        fail("{}: unexpected tensor '{}' (not part of the layout config.json describes; wrong config.json?)", label,
             name);
      }
    }
    m.matrix_dtype_ = matrix_types.size() > 1 ? "mixed" : matrix_types.count(WeightType::kBF16) ? "bf16" : "f32";
    count_bytes();
  }

  void count_bytes() {
    const ZayaConfig& c = m.config_;
    const InferWeights& w = m.weights_;
    const int64_t D = c.hidden, C = c.conv_channels(), R = c.router_hidden, N = c.router_slots();
    WeightBytes& b = m.bytes_;
    b = {};
    for (const InferAttention& a : w.attn) {
      b.dense += a.q.bytes() + a.k.bytes() + a.v_cur.bytes() + a.v_prev.bytes() + a.conv_b.bytes() + a.o.bytes();
      b.dense += 4 * (5 * D + 3 * C + C + c.kv_heads);  // norm, merge, conv A, conv B bias, temp
    }
    for (const InferMoe& mo : w.moe) {
      b.dense += mo.down.bytes() + mo.mlp0.bytes() + mo.mlp2.bytes() + mo.mlp4.bytes();
      b.dense += 4 * (5 * D + 6 * R + N);
    }
    b.dense += 4 * 5 * D;
    if (!w.moe.empty()) b.per_expert = w.moe[0].fc1[0].bytes() + w.moe[0].fc2[0].bytes();
    b.lm_head = w.embed.bytes();
    b.total = b.dense + b.lm_head + b.per_expert * c.experts * c.num_blocks;
  }
};

namespace {

// Reads every page of the mapped shards once (sequentially, in parallel).
void prefetch_mapping(const SafetensorsDir& st) {
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const SafetensorsFile& f : st.shards()) {
    auto buf = f.data_buffer();
    if (buf.empty()) continue;
    const auto begin = reinterpret_cast<uintptr_t>(buf.data()) / page * page;
    const auto end = reinterpret_cast<uintptr_t>(buf.data() + buf.size());
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
    const int64_t pages = int64_t((end - begin + page - 1) / page);
    volatile uint8_t sink = 0;
    uint8_t local = 0;
#pragma omp parallel for schedule(static) reduction(^ : local)
    for (int64_t i = 0; i < pages; ++i) {
      const uintptr_t a = std::max<uintptr_t>(begin + uintptr_t(i) * page, reinterpret_cast<uintptr_t>(buf.data()));
      if (a < end) local ^= *reinterpret_cast<const uint8_t*>(a);
    }
    sink = local;
    (void)sink;
  }
}

}  // namespace

std::unique_ptr<InferModel> InferModel::load(const std::string& dir, const InferLoadOptions& options) {
  check_weight_dtype_option(options.dtype, "--dtype");
  std::unique_ptr<InferModel> m(new InferModel());
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  nlohmann::json config_json;
  {
    std::ifstream in(config_path);
    ZAYA_CHECK(in.good(), "cannot read '{}' (a model directory holds config.json and the safetensors weights)",
               config_path);
    try {
      config_json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: invalid JSON: {}", config_path, e.what());
    }
  }
  // The native 40-layer layout (ZAYA1-8B and later) or the legacy one (ZAYA1-base).
  m->native_ = is_native_zaya_config(config_json);
  m->config_ =
      m->native_ ? native_config_from_json(config_json, config_path) : config_from_hf_json(config_json, config_path);
  m->source_ = dir;
  m->files_.emplace(SafetensorsDir::open(dir));
  if (options.prefetch) prefetch_mapping(*m->files_);
  Builder b(*m);
  b.st = &*m->files_;
  b.want = options.dtype;
  b.label = dir;
  b.native = m->native_;
  b.build();
  return m;
}

std::unique_ptr<InferModel> InferModel::load_checkpoint(const std::string& dir, const InferLoadOptions& options) {
  check_weight_dtype_option(options.dtype, "--dtype");
  const CheckpointReader ck = CheckpointReader::open(dir);
  const TrainConfig config = parse_train_config(ck.meta().config_toml, dir + "/metadata.json (config)");
  auto held = std::make_unique<ZayaModel>(config.model);
  auto read_table = [&](const ParamTable& table, float* base) {
    for (const ParamEntry& e : table.entries()) {
      ZAYA_CHECK(ck.has(e.name), "{}: missing tensor '{}' (shape {}); the checkpoint does not match its config", dir,
                 e.name, format_shape(e.shape));
      ck.read(e.name, base + e.offset, CkptDType::kF32, e.shape);
    }
  };
  read_table(held->params(), held->param_data());
  read_table(held->buffers(), held->buffer_data());
  std::unique_ptr<InferModel> m = from_model(*held, options.dtype == "bf16" ? "bf16" : "f32");
  m->held_ = std::move(held);
  m->source_ = dir;
  m->tokenizer_hint_ = config.data.tokenizer;
  return m;
}

std::unique_ptr<InferModel> InferModel::open(const std::string& dir, const InferLoadOptions& options) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(dir) / "metadata.json", ec)) return load_checkpoint(dir, options);
  return load(dir, options);
}

std::unique_ptr<InferModel> InferModel::from_model(const ZayaModel& model, const std::string& dtype) {
  check_weight_dtype_option(dtype, "dtype");
  std::unique_ptr<InferModel> m(new InferModel());
  m->config_ = model.config();
  m->source_ = "memory";
  Builder b(*m);
  b.zm = &model;
  b.want = dtype;
  b.label = "model";
  b.build();
  return m;
}

}  // namespace zaya
