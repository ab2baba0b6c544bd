#pragma once
// Interconnect curves from `zaya bench comm --json` (docs/bench.md, format
// version 1): one curve per run (collective x data type x op) with the
// out-of-place busbw of every row (in place where a collective has only
// that form), for the group size of the run. Runs of collectives the planner
// does not use are skipped; rows without a measurement are skipped.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/plan/hardware_profile.h"

namespace zaya {

// `scope`: "intra" or "inter" (where the ranks of the run sat). Throws naming
// `source` and the field on a malformed document.
std::vector<CommCurve> comm_curves_from_bench_json(const nlohmann::json& j, const std::string& source,
                                                   const std::string& scope);

// Replaces the profile's curves of the same collective, group size and scope.
void merge_comm_curves(HardwareProfile& profile, const std::vector<CommCurve>& curves);

}  // namespace zaya
