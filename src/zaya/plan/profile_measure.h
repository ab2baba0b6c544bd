#pragma once
// `zaya profile measure`: this machine into a hardware profile, with the
// instruments of `zaya bench` (docs/bench.md):
//   GEMMs      bench/gemm_run: peaks and an efficiency table over a generic
//              grid plus, with models given, every forward/backward GEMM of
//              those models (f32) and their Muon Newton-Schulz GEMMs (bf16)
//   bandwidth  bench/membw_bench: STREAM triad beyond the last-level cache
//   non-GEMM   exp throughput and the cost of one parallel region
//   network    under mpirun: reduce_scatter, all_gather, all_to_all and
//              all_reduce busbw over message sizes on all ranks
// Every rank measures at once (ranks that share a node contend for it as
// training will); rank 0 keeps the result.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zaya/dist/comm.h"
#include "zaya/plan/hardware_profile.h"

namespace zaya {

struct ProfileMeasureOptions {
  std::string name = "this-machine";
  std::vector<std::string> models;                             // presets / config.json whose GEMMs to measure exactly
  std::vector<int64_t> micro_batches = {8}, seq_lens = {256};  // every combination is measured
  int64_t ep = 1;
  double gemm_min_seconds = 0.03;
  uint64_t membw_bytes = uint64_t(256) << 20;
  uint64_t comm_max_bytes = uint64_t(16) << 20;
  bool quick = false;  // tests: tiny sweeps
};

// `log` receives one progress line at a time (rank 0 prints it).
HardwareProfile measure_profile(const ProfileMeasureOptions& options, Comm& world,
                                const std::function<void(const std::string&)>& log = {});

}  // namespace zaya
