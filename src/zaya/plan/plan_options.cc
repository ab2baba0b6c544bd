#include "zaya/plan/plan_options.h"

#include "zaya/bench/gemm_run.h"
#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {

PlanSetup setup_plan(const PlanCommonOptions& o) {
  PlanSetup s;
  s.profile = resolve_profile(o.profile);
  s.config = load_model_config(o.model);
  s.config.validate(o.model);
  std::vector<GemmEfficiencyTable> tables;
  for (const std::string& path : o.gemm_tables) {
    // A `zaya bench gemm --json` file, or a profile whose measured table is
    // wanted.
    const nlohmann::json j = read_json_file(path, "--gemm-table");
    if (j.is_object() && j.value("format", "") == "zaya.hardware_profile") {
      const HardwareProfile other = HardwareProfile::from_json(j, path);
      ZAYA_CHECK(other.gemm_table.has_value(), "{}: this profile has no gemm_table to use as --gemm-table", path);
      tables.push_back(*other.gemm_table);
    } else {
      tables.push_back(GemmEfficiencyTable::from_json(j, path));
    }
  }
  const bool gpu = s.profile.device_kind == "gpu";
  TrainLayout& L = s.layout;
  L.world = o.world;
  L.ep = o.ep;
  L.cp = o.cp;
  L.micro_batch = o.micro_batch > 0 ? o.micro_batch : (gpu ? 1 : 8);
  L.seq_len = o.seq_len > 0 ? o.seq_len : (gpu ? 4096 : 256);
  L.dtype = o.dtype.empty() ? (gpu ? "bf16" : "f32") : o.dtype;
  L.ns_dtype = o.ns_dtype;
  L.muon = o.muon;
  L.ns_steps = o.ns_steps;
  L.skip_fraction = o.skip_fraction;
  L.recompute = parse_recompute(o.recompute, "--recompute");
  ZAYA_CHECK_USAGE(o.loss_chunk >= 0, "--loss-chunk = {} is invalid; allowed: >= 0 (0: all rows at once)",
                   o.loss_chunk);
  L.loss_chunk = o.loss_chunk;
  L.cpu_trainer = !gpu;
  ZAYA_CHECK_USAGE(o.overlap == "auto" || o.overlap == "on" || o.overlap == "off",
                   "--overlap = '{}' is invalid; allowed: auto, on, off", o.overlap);
  L.overlap = o.overlap == "auto" ? -1 : o.overlap == "on" ? 1 : 0;
  // Mixed precision: bf16 parameters gathered; gradients reduced in
  // --grad-dtype.
  L.param_bytes = L.dtype == "bf16" ? 2 : 4;
  const std::string grad = o.grad_dtype.empty() ? L.dtype : o.grad_dtype;
  ZAYA_CHECK_USAGE(grad == "f32" || grad == "bf16", "--grad-dtype = '{}' is invalid; allowed: f32, bf16", grad);
  L.grad_bytes = grad == "bf16" ? 2 : 4;
  if (o.global_batch > 0) {
    ZAYA_CHECK(o.grad_accum == 0, "give --global-batch or --grad-accum, not both");
    ZAYA_CHECK_USAGE(L.cp >= 1 && L.world % L.cp == 0, "--cp = {} is invalid; allowed: a divisor of --world ({})", L.cp,
                     L.world);
    const int64_t per_micro = L.data_ranks() * L.micro_batch;
    ZAYA_CHECK_USAGE(o.global_batch % per_micro == 0,
                     "--global-batch = {} is invalid; allowed: a multiple of world / "
                     "cp x micro-batch = {} x {} = {}",
                     o.global_batch, L.data_ranks(), L.micro_batch, per_micro);
    L.grad_accum = o.global_batch / per_micro;
  } else {
    L.grad_accum = o.grad_accum > 0 ? o.grad_accum : 1;
  }
  L.validate(s.config, s.profile);
  s.gemm.emplace(s.profile, std::move(tables));
  return s;
}

}  // namespace zaya
