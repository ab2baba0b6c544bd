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
  int64_t elements = 0;  // per array
  int threads = 0;
  double best_gbps = 0;  // GB/s (1e9 bytes), best of the timed repetitions, as STREAM reports
  double mean_gbps = 0;
  double min_seconds = 0;  // of one repetition
  int passes = 1;          // sweeps per repetition
};

// Runs `kernel` over arrays of `elements` doubles with `threads` OpenMP
// threads (0: current default), `reps` timed repetitions after one untimed
// pass (page faults and first touch stay out of the timing). Each repetition
// makes `passes` sweeps over the arrays inside one parallel region, so that
// cache-resident arrays (a few microseconds per sweep) are timed over many
// sweeps instead of one fork/join and a clock read; every thread keeps its
// own static block of the arrays in every sweep, as with one sweep.
StreamResult run_stream(StreamKernel kernel, int64_t elements, int threads, int reps, int passes = 1);

// Sustained DRAM bandwidth in GB/s: STREAM triad on arrays far larger than the caches.
double measure_dram_bandwidth_gbps(int threads = 0);

// The bandwidth a working set of `bytes` sees (the inference roofline's
// probe): STREAM triad over three arrays holding `bytes` in all, best of 10;
// `bytes` <= 0: DRAM.
double working_set_bandwidth_gbps(int64_t bytes);
// Elements per array of that triad: bytes / 24, at least one million (24 MB
// in all, so the timing is not one short sweep).
int64_t working_set_stream_elements(int64_t bytes);

}  // namespace zaya
