#include "zaya/bench/io_job.h"

#include "zaya/bench/byte_size.h"
#include "zaya/bench/gemm_run.h"
#include "zaya/core/error.h"
#include "zaya/model/params.h"

namespace zaya {

IoJobPlan plan_io_job(const IoJobOptions& o) {
  IoJobPlan p;
  p.io = o.io;
  p.io.file_bytes = parse_byte_size(o.file_size, "--file-size");
  p.io.block_bytes = parse_byte_size(o.block_size, "--block-size");
  if (o.model.empty()) return p;
  ZAYA_CHECK_USAGE(o.ranks >= 1, "--ranks = {} is invalid; allowed: >= 1", o.ranks);
  p.from_model = true;
  p.model_params = count_parameters(load_model_config(o.model)).total;
  p.checkpoint_bytes = uint64_t(p.model_params) * 12;
  p.io.files = o.ranks;
  p.io.file_bytes = (p.checkpoint_bytes / uint64_t(o.ranks) + 4095) / 4096 * 4096;
  return p;
}

}  // namespace zaya
