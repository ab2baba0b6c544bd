#pragma once
// Built-in hardware profiles for clusters zaya.cpp users plan for before they
// can measure them: AMD MI300X with Pensando Pollara 400 (the ZAYA1 cluster,
// docs/systems-notes.md §1.1), NVIDIA H100 SXM and H200 SXM with NVLink
// and 400 Gb/s InfiniBand. Datasheet peaks are marked "vendor"; everything
// derived from them (achievable GEMM share, tile sizes, collective curves from
// link rates) is marked "estimate" with a note saying how. Measure your own
// machine with `zaya profile measure` for anything better.

#include <string>
#include <vector>

#include "zaya/plan/hardware_profile.h"

namespace zaya {

const std::vector<HardwareProfile>& builtin_profiles();
// Null when there is no built-in of that name.
const HardwareProfile* find_builtin_profile(const std::string& name);

// An estimated busbw curve (alpha-beta shape): busbw(s) = peak s / (s +
// s_half), at sizes 4 KiB .. 4 GiB (x4), for built-in profiles and tests.
CommCurve alpha_beta_curve(const std::string& collective, int ranks, const std::string& scope, double peak_gbps,
                           double half_bytes);

}  // namespace zaya
