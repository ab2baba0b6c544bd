#pragma once
// STREAM kernels (McCalpin): copy, scale, add, triad over float64 arrays, the
// reference measure of sustainable memory bandwidth. Shared by
// `zaya bench membw` and the inference roofline (`zaya bench infer`).

#include <cstdint>
#include <string>

namespace zaya {

enum class StreamKernel { kCopy, kScale, kAdd, kTriad };
const char* stream_kernel_name(StreamKernel k);
// Bytes moved per element (STREAM's counting: copy/scale 16, add/triad 24).
int stream_bytes_per_element(StreamKernel k);

struct StreamResult {
  StreamKernel kernel = StreamKernel::kTriad;
  int64_t elements = 0;   // per array
  int threads = 0;
  double best_gbps = 0;   // GB/s (1e9 bytes), best of the timed repetitions, as STREAM reports
  double mean_gbps = 0;
  double min_seconds = 0;
};

// Runs `kernel` over arrays of `elements` doubles with `threads` OpenMP
// threads (0: current default), `reps` timed repetitions after one untimed
// pass (page faults and first touch stay out of the timing).
StreamResult run_stream(StreamKernel kernel, int64_t elements, int threads, int reps);

// Sustained DRAM bandwidth in GB/s: STREAM triad on arrays far larger than the caches.
double measure_dram_bandwidth_gbps(int threads = 0);

}  // namespace zaya
