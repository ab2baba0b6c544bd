#include "zaya/plan/size_job.h"

#include <fmt/format.h>

#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/formats/hf_config.h"
#include "zaya/io/atomic_file.h"

namespace zaya {

SizeJobResult run_size_job(const SizeJobOptions& o) {
  SizeJobResult r;
  PlanCommonOptions common = o.common;
  if (!o.check.empty()) common.model = o.check;
  r.setup = setup_plan(common);
  const GemmModel& gemm = *r.setup.gemm;
  if (!o.check.empty()) {
    ZAYA_CHECK_USAGE(o.total == 0 && o.active == 0 && o.compute == 0,
                     "--check takes no target (--total/--active/--compute)");
    r.findings = check_config(r.setup.config, r.setup.layout, gemm);
    return r;
  }
  SizeTarget t;
  t.total_params = o.total;
  t.active_params = o.active;
  t.compute_flops = o.compute;
  r.proposals = propose_configs(t, r.setup.layout, gemm, o.count);
  return r;
}

void create_size_proposal_dir(const std::string& dir) { std::filesystem::create_directories(dir); }

std::string save_size_proposal(const std::string& dir, int index, const ZayaConfig& config) {
  const std::string path = fmt::format("{}/proposal{}.json", dir, index);
  write_file_atomic(path, config_to_hf_json(config, "bfloat16").dump(2) + "\n");
  return path;
}

}  // namespace zaya
