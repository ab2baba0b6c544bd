#pragma once
// Collective time from a profile's busbw curves (nccl-tests conventions,
// docs/bench.md): for a collective over n ranks and a message of `bytes`
// (nccl-tests' size column: the larger of a rank's send and receive buffer),
//
//   busbw  = the curve's busbw at that size, interpolated in log(size);
//            below the first point the first point's time (latency-bound),
//            above the last point its busbw
//   algbw  = busbw / factor(n)   (all_reduce 2(n-1)/n; reduce_scatter,
//            all_gather, all_to_all (n-1)/n; broadcast 1)
//   time   = bytes / algbw
//
// The curve is the one of that collective whose group size is nearest to n
// (in log ratio), preferring the scope n implies: inside one node ("intra")
// when n <= devices_per_node, else across nodes ("inter").

#include <string>

#include "zaya/plan/hardware_profile.h"

namespace zaya {

struct CommEstimate {
  double seconds = 0;
  double busbw_gbps = 0;
  const CommCurve* curve = nullptr;  // null: n = 1 or no curve (then 0 s, see `missing`)
  bool missing = false;              // the profile has no curve for this collective
};

double comm_busbw_factor(const std::string& collective, int ranks);

CommEstimate estimate_collective(const HardwareProfile& profile, const std::string& collective, int ranks,
                                 double bytes);

}  // namespace zaya
