#pragma once
// GEMM time on a hardware profile. With a measured efficiency table (`zaya
// bench gemm --json`, in the profile or given with --gemm-table) a shape's
// time comes from its measurement (the median call: a step sums typical calls),
// or from the nearest measured shape; without
// one, from the analytic model of docs/prior-art.md §5.1:
//
//   tile efficiency  = M N / (ceil(M/tm) tm  ceil(N/tn) tn), with smaller tiles
//                      (lower reuse: x sqrt(area ratio)) for skinny GEMMs
//   wave efficiency  = tiles / (ceil(tiles / CUs) CUs), K split into slices
//                      of >= 256 when there are fewer tiles than CUs
//   K efficiency     = K / (ceil(K/align) align)
//   compute time     = 2MNK / (peak x gemm_efficiency x tile x wave x K eff)
//   memory time      = bytes / membw          (operands once each, C in f32)
//   time             = max(compute, memory)   (launch overhead: the callers add
//   it per kernel)

#include <string>
#include <vector>

#include "zaya/bench/gemm_shapes.h"
#include "zaya/bench/gemm_table.h"
#include "zaya/plan/hardware_profile.h"

namespace zaya {

struct GemmEstimate {
  double seconds = 0;
  double efficiency = 0;       // achieved share of the dtype's peak
  std::string basis;           // "measured", "nearest measured MxNxK", "model"
  double tile_efficiency = 1;  // analytic model only
  double wave_efficiency = 1;
  bool memory_bound = false;
};

class GemmModel {
 public:
  // `extra` tables are searched (exact shapes first) before the profile's own.
  explicit GemmModel(const HardwareProfile& profile, std::vector<GemmEfficiencyTable> extra = {});

  GemmEstimate estimate(const std::string& dtype, const GemmShape& shape) const;
  // The analytic model alone (what the sizing rules reason with on any
  // profile).
  GemmEstimate analytic(const std::string& dtype, const GemmShape& shape) const;
  bool has_measurements(const std::string& dtype) const;
  const HardwareProfile& profile() const { return profile_; }

 private:
  HardwareProfile profile_;                  // a copy: the model outlives whatever it was built from
  std::vector<GemmEfficiencyTable> tables_;  // extra first, then the profile's
};

}  // namespace zaya
