#include "zaya/infer/infer_model.h"

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/core/bf16.h"
#include "zaya/core/enum_names.h"
#include "zaya/core/error.h"
#include "zaya/core/q8_0.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/formats/native_config.h"
#include "zaya/infer/infer_model_builder.h"
#include "zaya/io/gguf_vocab.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/model/config_toml.h"
#include "zaya/model/params.h"

namespace zaya {

namespace {

WeightDtype parse_weight_dtype(const std::string& dtype, const std::string& flag) {
  const WeightDtype* v = enum_find<WeightDtype>(kWeightDtypeNames, dtype);
  if (v == nullptr)
    fail_usage("{} '{}' is invalid; allowed: {}", flag, dtype, enum_allowed<WeightDtype>(kWeightDtypeNames));
  return *v;
}

}  // namespace

void check_weight_dtype_option(const std::string& dtype, const std::string& flag) { parse_weight_dtype(dtype, flag); }

namespace {

// Asks the kernel to read the mapped shards ahead and, with `touch`, reads every page once (sequentially, in
// parallel); without it nothing becomes resident in this process (the huge-page copy reads each tensor itself).
void prefetch_mapping(const SafetensorsDir& st, bool touch) {
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const SafetensorsFile& f : st.shards()) {
    auto buf = f.data_buffer();
    if (buf.empty()) continue;
    const auto begin = reinterpret_cast<uintptr_t>(buf.data()) / page * page;
    const auto end = reinterpret_cast<uintptr_t>(buf.data() + buf.size());
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
    if (!touch) continue;
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

// Whether InferLoadOptions::huge_pages copies the mapped matrices (infer_model.h gives the rules).
bool copy_into_huge_pages(const SafetensorsDir& st, bool wanted) {
  const char* env = std::getenv("ZAYA_HUGE_PAGES");
  if (!wanted || (env != nullptr && std::string(env) == "0")) return false;
  const std::string mode = transparent_huge_pages_mode();
  if (mode.empty() || mode == "never") return false;
  int64_t bytes = 0;
  for (const SafetensorsFile& f : st.shards()) bytes += int64_t(f.data_buffer().size());
  const int64_t available = memory_available_bytes();
  return available < 0 || bytes <= available / 4 * 3;
}

}  // namespace

std::unique_ptr<InferModel> InferModel::load(const std::string& dir, const InferLoadOptions& options) {
  const WeightDtype dtype = parse_weight_dtype(options.dtype, "--dtype");
  std::unique_ptr<InferModel> m(new InferModel());
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const nlohmann::json config_json =
      read_json_file(config_path, "", "a model directory holds config.json and the safetensors weights");
  // The native 40-layer layout (ZAYA1-8B and later) or the legacy one (ZAYA1-base).
  m->native_ = is_native_zaya_config(config_json);
  m->config_ =
      m->native_ ? native_config_from_json(config_json, config_path) : config_from_hf_json(config_json, config_path);
  m->source_ = dir;
  m->files_.emplace(SafetensorsDir::open(dir));
  const bool copy = copy_into_huge_pages(*m->files_, options.huge_pages);
  // The copy reads every page anyway: only ask for read-ahead then.
  if (options.prefetch || copy) prefetch_mapping(*m->files_, !copy);
  Builder b(*m);
  b.st = &*m->files_;
  b.set_dtype(dtype);
  b.label = dir;
  b.native = m->native_;
  b.quant = parse_expert_quant(config_json, config_path);
  b.copy_mapped = copy;
  b.build();
  if (m->mapped_matrices_ == 0) m->files_.reset();  // everything was copied or converted: unmap the files
  return m;
}

std::unique_ptr<InferModel> InferModel::load_checkpoint(const std::string& dir, const InferLoadOptions& options) {
  const WeightDtype dtype = parse_weight_dtype(options.dtype, "--dtype");
  const CheckpointReader ck = CheckpointReader::open(dir);
  std::unique_ptr<ZayaModel> held = load_checkpoint_model(ck);
  std::unique_ptr<InferModel> m = from_model(*held, dtype == WeightDtype::kAuto ? "f32" : options.dtype);
  m->held_ = std::move(held);
  m->source_ = dir;
  m->tokenizer_hint_ = checkpoint_tokenizer(ck);
  return m;
}

std::unique_ptr<InferModel> InferModel::load_gguf(const std::string& path, const InferLoadOptions& options) {
  const WeightDtype asked = parse_weight_dtype(options.dtype, "--dtype");
  const ZayaGgufFile file = ZayaGgufFile::open(path);
  auto held = std::make_unique<ZayaModel>(file.config());
  // A Q8_0 file under auto or int8: its Q8_0 tensors are copied block for
  // block into int8 matrices (never widened; `held` keeps zeros there).
  const bool q8_blocks = file.has_q8_0() && (asked == WeightDtype::kAuto || asked == WeightDtype::kInt8);
  load_gguf_weights(*held, file, q8_blocks);
  const GgmlType embed_type = file.gguf().tensor("token_embd.weight").type;
  const bool bf16_file = embed_type == GgmlType::kBF16 || file.has_q8_0();  // a q8_0 export's other matrices are BF16
  const WeightDtype dtype = q8_blocks                     ? WeightDtype::kInt8
                            : asked != WeightDtype::kAuto ? asked
                            : bf16_file                   ? WeightDtype::kBF16
                                                          : WeightDtype::kF32;
  std::unique_ptr<InferModel> m(new InferModel());
  m->config_ = held->config();
  Builder b(*m);
  b.zm = held.get();
  b.q8_file = q8_blocks ? &file : nullptr;
  b.set_dtype(dtype);
  b.label = path;
  b.build();
  m->held_ = std::move(held);
  m->source_ = path;
  // The embedded tokenizer, else a tokenizer.model beside the file, else the
  // file again (whose loader then says how to give one).
  const std::string beside = (std::filesystem::path(path).parent_path() / "tokenizer.model").string();
  std::error_code ec;
  m->tokenizer_hint_ =
      !file.gguf().metadata().has(kZayaSentencePieceModelKey) && std::filesystem::exists(beside, ec) ? beside : path;
  return m;
}

namespace {

std::unique_ptr<InferModel> open_base(const std::string& path, const InferLoadOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    ZAYA_CHECK(is_gguf_file(path),
               "{}: a file, but not a GGUF file; a model is a directory (config.json + safetensors), a training "
               "checkpoint (step_XXXXXXXX) or a .gguf file written by `zaya ckpt export`",
               path);
    return InferModel::load_gguf(path, options);
  }
  if (std::filesystem::exists(std::filesystem::path(path) / "metadata.json", ec))
    return InferModel::load_checkpoint(path, options);
  return InferModel::load(path, options);
}

}  // namespace

std::unique_ptr<InferModel> InferModel::open(const std::string& path, const InferLoadOptions& options) {
  std::unique_ptr<InferModel> m = open_base(path, options);
  if (!options.lora.empty()) m->set_lora(read_peft_adapter(options.lora, m->config()));
  return m;
}

std::string lora_mismatch(const ZayaConfig& model, const LoraAdapters& adapters) {
  const ZayaConfig& a = adapters.model_config();
  bool same = true;  // every shape an adapter's targets depend on (model/lora.h lora_slot)
  for (LoraTarget t : all_lora_targets()) {
    const LoraSlot x = lora_slot(a, t), y = lora_slot(model, t);
    same = same && x.in == y.in && x.out == y.out && x.row_offset == y.row_offset;
  }
  if (same && a.num_blocks == model.num_blocks && a.experts == model.experts) return "";
  return fmt::format(
      "it was made for another model (hidden {}, {} blocks, {} experts of width {}) than this one "
      "(hidden {}, {} blocks, {} experts of width {})",
      a.hidden, a.num_blocks, a.experts, a.expert_ffn, model.hidden, model.num_blocks, model.experts, model.expert_ffn);
}

std::unique_ptr<LoraAdapters> load_lora_adapter(const std::string& dir, const ZayaConfig& model) {
  std::unique_ptr<LoraAdapters> a = read_peft_adapter(dir, model);
  const std::string why = lora_mismatch(model, *a);
  ZAYA_CHECK(why.empty(), "LoRA adapter {}: {}", dir, why);
  return a;
}

void InferModel::set_lora(std::unique_ptr<LoraAdapters> adapters) {
  if (adapters != nullptr) {
    const std::string why = lora_mismatch(config_, *adapters);
    ZAYA_CHECK(why.empty(), "LoRA adapter: {} ({})", why, source_);
  }
  lora_ = std::move(adapters);
}

std::unique_ptr<InferModel> InferModel::from_model(const ZayaModel& model, const std::string& dtype_name) {
  const WeightDtype dtype = parse_weight_dtype(dtype_name, "dtype");
  std::unique_ptr<InferModel> m(new InferModel());
  m->config_ = model.config();
  m->source_ = "memory";
  Builder b(*m);
  b.zm = &model;
  b.set_dtype(dtype);
  b.label = "model";
  b.build();
  return m;
}

std::unique_ptr<InferModel> InferModel::from_model(const ZayaModel& model, const ZayaConfig& config,
                                                   const std::string& dtype) {
  config.validate("inference config");
  ZayaConfig same = config;  // the model's attention pattern on the given shapes
  same.sliding_window = model.config().sliding_window;
  same.sliding_blocks = model.config().sliding_blocks;
  same.sliding_rope_theta = model.config().sliding_rope_theta;
  same.rope_theta = model.config().rope_theta;
  ZAYA_CHECK(model_table_to_toml("", same) == model_table_to_toml("", model.config()),
             "inference config: differs from the model's in more than sliding_window, sliding_blocks, rope_theta and "
             "sliding_rope_theta; allowed: only those");
  std::unique_ptr<InferModel> m = from_model(model, dtype);
  m->config_ = config;
  return m;
}

}  // namespace zaya
