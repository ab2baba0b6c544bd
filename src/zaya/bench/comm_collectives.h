#pragma once
// The collectives of `zaya bench comm` and their nccl-tests conventions
// (docs/prior-art.md §1.1): how a message size maps onto buffers and
// counts, and the algorithm / bus bandwidth of one timed operation.
//
//   size  (the "size" column)  max(send, receive) buffer bytes of one rank
//   count (the "count" column) the element count passed to the operation
//   algbw = S / t,   busbw = algbw * factor(n)
//
// | collective     | count                | S                | factor     |
// |----------------|----------------------|------------------|------------|
// | all_reduce     | size / e             | count * e        | 2(n-1)/n   |
// | reduce_scatter | size / e / n (recv)  | count * e * n    | (n-1)/n    |
// | all_gather     | size / e / n (send)  | count * e * n    | (n-1)/n    |
// | broadcast      | size / e             | count * e        | 1          |
// | reduce         | size / e             | count * e        | 1          |
// | all_to_all     | size / e / n (peer)  | count * e * n    | (n-1)/n    |
// | all_to_all_v   | traffic matrix       | busiest rank     | off-diagonal share (comm_bench.h) |
// | send_recv      | size / e             | count * e        | 1          |
//
// (e = element bytes, n = ranks in the group.)

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zaya/dist/comm.h"

namespace zaya {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kAllToAllV, kSendRecv };

// Every collective, in the order `all` runs them.
const std::vector<Collective>& all_collectives();
const char* collective_name(Collective c);  // "all_reduce", ...
// Accepts the names above, nccl-tests' binary names (all_reduce_perf,
// alltoall, sendrecv, ...) and "bcast"; throws zaya::Error listing the choices.
Collective parse_collective(const std::string& name);

bool collective_reduces(Collective c);           // takes a reduction op
bool collective_has_root(Collective c);          // broadcast, reduce
bool collective_has_out_of_place(Collective c);  // not broadcast (Comm::broadcast works in place)
bool collective_has_in_place(Collective c);      // not all_to_all(_v), send_recv

// Buffers of one rank for a message of `bytes` (elements, not bytes).
struct CollGeometry {
  int64_t count = 0;        // the operation's count argument
  int64_t send_elems = 0;   // out-of-place send buffer
  int64_t recv_elems = 0;   // out-of-place receive buffer
  uint64_t size_bytes = 0;  // the size column
};
CollGeometry coll_geometry(Collective c, uint64_t bytes, size_t elem_bytes, int nranks);

// nccl-tests' busbw factor for n ranks (all_to_all_v: that of all_to_all).
double busbw_factor(Collective c, int nranks);

struct Bandwidth {
  double algbw = 0;  // GB/s (1e9 bytes per second)
  double busbw = 0;
};
// For every collective except all_to_all_v (whose bytes come from the traffic matrix).
Bandwidth coll_bandwidth(Collective c, int64_t count, size_t elem_bytes, double seconds, int nranks);

// Data types and ops by nccl-tests' names ("float", "bfloat16", "half",
// "double", "int32", "int64", "uint8"; "sum", "prod", "min", "max", "avg").
DType parse_dtype(const std::string& name);
ReduceOp parse_reduce_op(const std::string& name);
std::vector<DType> all_dtypes();
std::vector<ReduceOp> all_reduce_ops();
bool is_floating(DType t);

}  // namespace zaya
