#include "zaya/infer/benchmark_job.h"

#include "zaya/core/error.h"
#include "zaya/ops/matvec.h"
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

InferBenchOptions infer_bench_options(const InferBenchJobOptions& o) {
  InferBenchOptions b = o.bench;
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
  if (m.draft) j["draft_model"] = m.draft->source();
  j["matvec_kernel"] = matvec_kernel_name();  // what decode ran on this CPU
  j["int8_matvec_kernel"] = matvec_q8_kernel_name();
  return j;
}

}  // namespace zaya
