#include "zaya/bench/comm_job_options.h"

#include "zaya/bench/byte_size.h"
#include "zaya/core/error.h"

namespace zaya {

CommJobSettings resolve_comm_job_options(const CommJobOptions& o) {
  CommJobSettings s;
  CommBenchOptions& opt = s.bench;
  opt.collectives.clear();
  for (const std::string& c : o.collectives) {
    if (c == "all")
      opt.collectives = all_collectives();
    else
      opt.collectives.push_back(parse_collective(c));
  }
  ZAYA_CHECK(!opt.collectives.empty(), "no collective to run");
  opt.min_bytes = parse_byte_size(o.min_bytes, "-b/--minbytes");
  opt.max_bytes = parse_byte_size(o.max_bytes, "-e/--maxbytes");
  opt.step_bytes = parse_byte_size(o.step_bytes, "-i/--stepbytes");
  opt.step_factor = o.step_factor;
  opt.iters = o.iters;
  opt.warmup = o.warmup;
  opt.agg_iters = o.agg_iters;
  opt.check = o.check;
  opt.average = o.average;
  opt.time_stat = o.time_stat;
  opt.root = o.root;
  opt.timeout = o.timeout;
  opt.raw = o.raw;
  ZAYA_CHECK_USAGE(!o.raw || o.timeout <= 0,
                   "--raw calls the MPI library directly, without the Comm layer's deadline: drop -T {} or --raw",
                   o.timeout);
  opt.fault = parse_comm_fault(o.fault);
  opt.stall_seconds = o.stall_seconds;
  opt.dtypes.clear();
  for (const std::string& d : o.dtypes) {
    if (d == "all")
      opt.dtypes = all_dtypes();
    else
      opt.dtypes.push_back(parse_dtype(d));
  }
  opt.ops.clear();
  for (const std::string& op : o.ops) {
    if (op == "all") {
      opt.ops = all_reduce_ops();
      s.all_ops = true;
    } else {
      opt.ops.push_back(parse_reduce_op(op));
    }
  }
  s.split = parse_split(o.split);
  return s;
}

std::vector<CommCombo> comm_combos(const CommBenchOptions& opt, bool all_ops, int group_ranks) {
  std::vector<CommCombo> combos;
  for (Collective c : opt.collectives)
    for (DType t : opt.dtypes) {
      if (!collective_reduces(c)) {
        combos.push_back({c, t, ReduceOp::kSum});
        continue;
      }
      for (ReduceOp op : opt.ops) {
        if (comm_combination_valid(c, t, op))
          combos.push_back({c, t, op});
        else
          ZAYA_CHECK(all_ops, "-o avg needs a floating-point data type, got {}", dtype_name(t));
      }
    }
  if (group_ranks < 2)
    std::erase_if(combos, [&](const CommCombo& x) {
      if (x.coll != Collective::kSendRecv) return false;
      ZAYA_CHECK(opt.collectives.size() > 1,
                 "send_recv needs at least 2 ranks per group; run it under mpirun -np 2 or more");
      return true;
    });
  return combos;
}

}  // namespace zaya
