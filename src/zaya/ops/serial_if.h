#pragma once
// Runs the OpenMP regions opened inside its scope on the calling thread.
//
// The element-wise ops (norms, residual merges, RoPE, routing) open a parallel
// region per call. In an inference decode step they touch a few thousand
// floats, less than a region costs (and on a busy machine a region can wait a
// scheduler tick for a descheduled thread), so small steps run them serially.
// Inside the scope the ops' loops (ops/parallel_for.h) see one thread and run
// on the caller without entering OpenMP at all.
// Thread counts never change results here: every op splits its work by rows.

#include <omp.h>

namespace zaya {

class SerialIf {
 public:
  explicit SerialIf(bool serial) : saved_(serial ? omp_get_max_threads() : 0) {
    if (saved_ > 0) omp_set_num_threads(1);
  }
  ~SerialIf() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  SerialIf(const SerialIf&) = delete;
  SerialIf& operator=(const SerialIf&) = delete;

 private:
  int saved_;
};

}  // namespace zaya
