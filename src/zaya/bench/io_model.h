#pragma once
// The storage model of docs/systems-notes.md §3 (ZAYA1-8B report,
// Appendix B): dataset reads per training step in pages and IOPS, and the
// step time below which storage, not compute, sets the pace.
//
//   G batch (sequences), s sequence length, b bytes per token, P page size,
//   t step time, I_max sustainable IOPS, sigma >= 1 scatter factor
//   bytes per step        G s b
//   I/O operations        N_io = sigma G s b / P
//   required IOPS         sigma G s b / (P t)
//   break-even step time  t_break = sigma G s b / (P I_max)   (storage-safe when t > t_break)
//   sigma from m extra page faults per sample: 1 + m P / (s b)
//
// ZAYA1: G = s = 4096, b = 4, P = 4096, t = 2.5 s, I_max = 70,000 gives 64 MiB
// and 16,384 pages per step, 6,554 sigma IOPS, t_break = 0.234 sigma s.

#include <cstdint>
#include <vector>

namespace zaya {

struct StorageModelInput {
  double batch = 4096;         // G
  double seq_len = 4096;       // s
  double bytes_per_token = 4;  // b
  double page_size = 4096;     // P
  double step_seconds = 2.5;   // t
  double iops = 70000;         // I_max
  double sigma = 1;            // scatter factor
};

struct StorageModel {
  double bytes_per_step = 0;
  double ideal_pages_per_step = 0;  // G s b / P
  double io_per_step = 0;           // N_io
  double required_iops = 0;
  double break_even_seconds = 0;  // t_break
  double headroom = 0;            // t / t_break (> 1: storage-safe)
  bool storage_safe = false;
};

StorageModel storage_model(const StorageModelInput& in);

// The model at the scatter factors 1, 2, 4 and 8 (the rest of `in` as given):
// how the verdict moves with sigma, beside the measured one.
struct StorageModelAtSigma {
  double sigma = 1;
  StorageModel model;
};
std::vector<StorageModelAtSigma> storage_model_sigma_table(const StorageModelInput& in);

// sigma = 1 + m P / (s b), for m extra page faults per sample.
double scatter_factor_from_extra_faults(double extra_faults_per_sample, double seq_len, double bytes_per_token,
                                        double page_size);

// Pages a window of `bytes` starting at byte `offset` touches.
int64_t pages_touched(uint64_t offset, uint64_t bytes, uint64_t page_size);

}  // namespace zaya
