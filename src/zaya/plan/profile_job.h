#pragma once
// The jobs of `zaya profile` that produce a profile file: a measurement of
// this machine (every rank measures, rank 0 saves), and network curves from
// `zaya bench comm --json` files merged into a profile (comm_import.h).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "zaya/dist/comm.h"
#include "zaya/plan/hardware_profile.h"
#include "zaya/plan/profile_measure.h"

namespace zaya {

// Every rank of `world` measures; rank 0 saves the profile to `out` and
// returns it, the other ranks get nullopt. `log` as measure_profile's.
std::optional<HardwareProfile> measure_profile_to_file(const ProfileMeasureOptions& options, Comm& world,
                                                       const std::string& out,
                                                       const std::function<void(const std::string&)>& log = {});

// Reads one `zaya bench comm --json` file and merges its curves into
// `profile`, replacing those of the same collective, group size and `scope`
// ("intra" or "inter"); returns the curves read.
std::vector<CommCurve> add_comm_file(HardwareProfile& profile, const std::string& path, const std::string& scope);

// Validates the profile (errors name `path`), then writes it there.
void save_validated_profile(const HardwareProfile& profile, const std::string& path);

}  // namespace zaya
