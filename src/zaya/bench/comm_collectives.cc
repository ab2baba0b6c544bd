#include "zaya/bench/comm_collectives.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> all = {
      Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather, Collective::kBroadcast,
      Collective::kReduce,    Collective::kAllToAll,      Collective::kAllToAllV, Collective::kSendRecv};
  return all;
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllGather: return "all_gather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kAllToAllV: return "all_to_all_v";
    case Collective::kSendRecv: return "send_recv";
  }
  return "?";
}

Collective parse_collective(const std::string& name) {
  std::string key;
  for (char ch : name)
    if (ch != '_' && ch != '-') key += char(std::tolower(static_cast<unsigned char>(ch)));
  if (key.size() > 4 && key.compare(key.size() - 4, 4, "perf") == 0) key.resize(key.size() - 4);
  for (Collective c : all_collectives()) {
    std::string canonical;
    for (const char* p = collective_name(c); *p; ++p)
      if (*p != '_') canonical += *p;
    if (key == canonical) return c;
  }
  if (key == "bcast") return Collective::kBroadcast;
  if (key == "alltoallv") return Collective::kAllToAllV;
  fail(
      "unknown collective '{}'; allowed: all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, "
      "all_to_all_v, send_recv, or all",
      name);
}

bool collective_reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}
bool collective_has_root(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }
bool collective_has_out_of_place(Collective c) { return c != Collective::kBroadcast; }
bool collective_has_in_place(Collective c) {
  return c != Collective::kAllToAll && c != Collective::kAllToAllV && c != Collective::kSendRecv;
}

CollGeometry coll_geometry(Collective c, uint64_t bytes, size_t e, int n) {
  ZAYA_ASSERT(e > 0 && n > 0);
  const int64_t elems = int64_t(bytes / e), per_rank = elems / n;
  CollGeometry g;
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv: g.count = g.send_elems = g.recv_elems = elems; break;
    case Collective::kReduceScatter:
      g.count = per_rank;
      g.send_elems = per_rank * n;
      g.recv_elems = per_rank;
      break;
    case Collective::kAllGather:
      g.count = per_rank;
      g.send_elems = per_rank;
      g.recv_elems = per_rank * n;
      break;
    case Collective::kAllToAll:
    case Collective::kAllToAllV:
      g.count = per_rank;
      g.send_elems = g.recv_elems = per_rank * n;
      break;
  }
  g.size_bytes = uint64_t(std::max(g.send_elems, g.recv_elems)) * e;
  return g;
}

double busbw_factor(Collective c, int n) {
  const double nd = double(n);
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (nd - 1) / nd;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllV: return (nd - 1) / nd;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv: return 1.0;
  }
  return 1.0;
}

Bandwidth coll_bandwidth(Collective c, int64_t count, size_t e, double seconds, int n) {
  const bool times_n = c == Collective::kReduceScatter || c == Collective::kAllGather || c == Collective::kAllToAll ||
                       c == Collective::kAllToAllV;
  const double bytes = double(count) * double(e) * (times_n ? double(n) : 1.0);
  Bandwidth b;
  if (seconds <= 0) return b;
  b.algbw = bytes / 1e9 / seconds;
  b.busbw = b.algbw * busbw_factor(c, n);
  return b;
}

DType parse_dtype(const std::string& name) {
  static const struct {
    const char* name;
    DType t;
  } names[] = {{"float", DType::kF32},   {"float32", DType::kF32}, {"f32", DType::kF32},       {"double", DType::kF64},
               {"float64", DType::kF64}, {"f64", DType::kF64},     {"bfloat16", DType::kBF16}, {"bf16", DType::kBF16},
               {"half", DType::kF16},    {"float16", DType::kF16}, {"f16", DType::kF16},       {"int32", DType::kI32},
               {"int", DType::kI32},     {"int64", DType::kI64},   {"uint8", DType::kU8},      {"u8", DType::kU8}};
  for (const auto& n : names)
    if (name == n.name) return n.t;
  fail("unknown data type '{}'; allowed: float, double, bfloat16, half, int32, int64, uint8, or all", name);
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : all_reduce_ops())
    if (name == reduce_op_name(op)) return op;
  fail("unknown reduction op '{}'; allowed: sum, prod, min, max, avg, or all", name);
}

std::vector<DType> all_dtypes() {
  return {DType::kU8, DType::kI32, DType::kI64, DType::kF16, DType::kF32, DType::kF64, DType::kBF16};
}
std::vector<ReduceOp> all_reduce_ops() {
  return {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};
}
bool is_floating(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16; }

}  // namespace zaya
