#include "zaya/infer/benchmark_job.h"

#include <fmt/format.h>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_fp8_bf16.h"
#include "zaya/ops/matvec_lowbit.h"
#include "zaya/ops/matvec_q8.h"

namespace zaya {

InferBenchModel open_infer_bench_model(const InferBenchJobOptions& o) {
  ZAYA_CHECK_USAGE(o.preset.empty() != o.model.empty(), "zaya bench infer: give exactly one of --preset and --model");
  check_weight_dtype_option(o.dtype, "--dtype");
  InferBenchModel m;
  if (!o.preset.empty()) {
    const ZayaConfig c = preset_config(o.preset);
    ZAYA_CHECK(o.preset != "zaya1-base",
               "--preset zaya1-base: random weights of 8.8B parameters need 35 GB in f32; benchmark the real "
               "checkpoint with --model DIR instead");
    m.random = std::make_unique<ZayaModel>(c);
    m.random->init(o.bench.seed);
    m.model = InferModel::from_model(*m.random, o.dtype);
    m.name = "preset " + o.preset;
  } else {
    InferLoadOptions lo;
    lo.dtype = o.dtype;
    lo.prefetch = true;
    m.model = InferModel::open(o.model, lo);
    m.name = o.model;
  }
  ZAYA_CHECK_USAGE(o.lora_adapters >= 0 && o.lora_rank >= 1, "--lora-adapters {} / --lora-rank {} are invalid",
                   o.lora_adapters, o.lora_rank);
  for (int64_t i = 0; i < o.lora_adapters; ++i) {
    LoraConfig l;
    l.enabled = true;
    l.rank = o.lora_rank;
    l.alpha = 2.0 * double(o.lora_rank);
    l.targets = all_lora_targets();
    auto a = std::make_unique<LoraAdapters>(m.model->config(), l);
    // Every float drawn (PEFT's initialisation zeroes one matrix of each pair): timing does not care, but a
    // trained adapter has both.
    for (int64_t k = 0; k < a->total_floats(); ++k)
      a->data()[k] = 0.01f * normal01(o.bench.seed + uint64_t(i), 17, uint64_t(k));
    m.loras.push_back(std::move(a));
  }
  if (!o.spec_model.empty()) {
    ZAYA_CHECK_USAGE(o.bench.spec_tokens > 0, "--spec-model {}: give --spec-tokens K, the draft tokens to time",
                     o.spec_model);
    InferLoadOptions lo;
    lo.dtype = o.dtype;
    lo.prefetch = true;
    try {
      m.draft = InferModel::open(o.spec_model, lo);
    } catch (const Error& e) {
      fail("--spec-model {}: {}", o.spec_model, e.what());
    }
  }
  return m;
}

InferBenchOptions infer_bench_options(const InferBenchJobOptions& o, const InferBenchModel& m) {
  InferBenchOptions b = o.bench;
  for (const std::unique_ptr<LoraAdapters>& a : m.loras) b.loras.push_back(a.get());
  b.draft_model = m.draft.get();
  b.bf16_activations = !o.exact;
  b.working_set_roofline = !o.no_working_set;
  if (o.no_prefill) b.prefill_lengths.clear();
  if (o.no_decode) b.batches.clear();
  return b;
}

nlohmann::json infer_bench_job_json(const InferBenchModel& m, const InferBenchOptions& options,
                                    const InferBenchResult& result) {
  nlohmann::json j = infer_bench_json(*m.model, options, result);
  j["model"] = m.name;
  j["lora_adapters"] = m.loras.size();
  if (!m.loras.empty()) j["lora_rank"] = m.loras[0]->config().rank;
  if (m.draft) j["draft_model"] = m.draft->source();
  j["matvec_kernel"] = matvec_kernel_name();  // what decode ran on this CPU
  j["int8_matvec_kernel"] = matvec_q8_kernel_name();
  j["fp8_matvec_kernel"] = fp8_bf16_activations() ? fmt::format("{} (bf16 activations)", matvec_fp8_bf16_kernel_name())
                                                  : fmt::format("{} (float activations)", matvec_lowbit_kernel_name());
  return j;
}

}  // namespace zaya
