#include "zaya/bench/io_model.h"

#include "zaya/core/error.h"

namespace zaya {

StorageModel storage_model(const StorageModelInput& in) {
  ZAYA_CHECK(in.batch > 0 && in.seq_len > 0 && in.bytes_per_token > 0 && in.page_size > 0,
             "the storage model needs positive batch, sequence length, bytes per token and page size");
  ZAYA_CHECK(in.sigma >= 1, "the scatter factor must be at least 1, got {}", in.sigma);
  StorageModel m;
  m.bytes_per_step = in.batch * in.seq_len * in.bytes_per_token;
  m.ideal_pages_per_step = m.bytes_per_step / in.page_size;
  m.io_per_step = in.sigma * m.ideal_pages_per_step;
  m.required_iops = in.step_seconds > 0 ? m.io_per_step / in.step_seconds : 0;
  m.break_even_seconds = in.iops > 0 ? m.io_per_step / in.iops : 0;
  m.headroom = m.break_even_seconds > 0 ? in.step_seconds / m.break_even_seconds : 0;
  m.storage_safe = in.step_seconds > m.break_even_seconds;
  return m;
}

std::vector<StorageModelAtSigma> storage_model_sigma_table(const StorageModelInput& in) {
  std::vector<StorageModelAtSigma> table;
  for (double sigma : {1.0, 2.0, 4.0, 8.0}) {
    StorageModelInput x = in;
    x.sigma = sigma;
    table.push_back({sigma, storage_model(x)});
  }
  return table;
}

double scatter_factor_from_extra_faults(double m, double seq_len, double bytes_per_token, double page_size) {
  return 1.0 + m * page_size / (seq_len * bytes_per_token);
}

int64_t pages_touched(uint64_t offset, uint64_t bytes, uint64_t page) {
  if (bytes == 0) return 0;
  return int64_t((offset + bytes - 1) / page - offset / page + 1);
}

}  // namespace zaya
