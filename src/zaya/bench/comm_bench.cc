#include "zaya/bench/comm_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/comm_data.h"
#include "zaya/core/arena.h"
#include "zaya/core/error.h"
#include "zaya/core/timer.h"

namespace zaya {

CommFault parse_comm_fault(const std::string& name) {
  for (CommFault f : {CommFault::kNone, CommFault::kDropRank, CommFault::kOffByOne, CommFault::kStall})
    if (name == comm_fault_name(f)) return f;
  fail("unknown fault '{}'; allowed: none, drop-rank, off-by-one, stall", name);
}

const char* comm_fault_name(CommFault f) {
  switch (f) {
    case CommFault::kNone: return "none";
    case CommFault::kDropRank: return "drop-rank";
    case CommFault::kOffByOne: return "off-by-one";
    case CommFault::kStall: return "stall";
  }
  return "?";
}

bool comm_combination_valid(Collective c, DType t, ReduceOp op) {
  return !collective_reduces(c) || op != ReduceOp::kAvg || is_floating(t);
}

// Buffers of one sweep, sized for its largest message, and the geometry of
// the current size.
struct CommBench::Buffers {
  size_t elem = 4;
  size_t capacity = 0;  // bytes of each of send, recv and expected
  AlignedPtr<uint8_t> send, recv, expected;
  CollGeometry geo;
  // all_to_all_v: the whole matrix of counts and this rank's counts/displacements.
  std::vector<int64_t> matrix, sc, sd, rc, rd;
  int64_t a2av_send = 0, a2av_recv = 0;
  TrafficLoad load;
};

namespace {

// Per-rank send/receive layout of an all_to_all_v count matrix.
void a2av_layout(const std::vector<int64_t>& m, int n, int r, std::vector<int64_t>& sc, std::vector<int64_t>& sd,
                 std::vector<int64_t>& rc, std::vector<int64_t>& rd, int64_t& send_total, int64_t& recv_total) {
  sc.assign(size_t(n), 0);
  sd.assign(size_t(n), 0);
  rc.assign(size_t(n), 0);
  rd.assign(size_t(n), 0);
  send_total = recv_total = 0;
  for (int p = 0; p < n; ++p) {
    sc[size_t(p)] = m[size_t(r) * size_t(n) + size_t(p)];
    sd[size_t(p)] = send_total;
    send_total += sc[size_t(p)];
    rc[size_t(p)] = m[size_t(p) * size_t(n) + size_t(r)];
    rd[size_t(p)] = recv_total;
    recv_total += rc[size_t(p)];
  }
}

}  // namespace

CommBench::CommBench(Comm& world, Comm& group, CommBenchOptions options)
    : world_(world), group_(group), options_(std::move(options)) {
  const CommBenchOptions& o = options_;
  ZAYA_CHECK(o.iters >= 1, "iterations (-n) must be at least 1, got {}", o.iters);
  ZAYA_CHECK(o.warmup >= 0, "warm-up iterations (-w) must be >= 0, got {}", o.warmup);
  ZAYA_CHECK(o.agg_iters >= 1, "aggregated iterations (-m) must be at least 1, got {}", o.agg_iters);
  ZAYA_CHECK(o.check >= 0, "check iterations (-c) must be >= 0, got {}", o.check);
  ZAYA_CHECK(o.average >= 0 && o.average <= 3, "-a must be 0 (rank 0), 1 (mean), 2 (min) or 3 (max), got {}",
             o.average);
  ZAYA_CHECK_USAGE(o.time_stat == "mean" || o.time_stat == "median" || o.time_stat == "min",
                   "--time-stat '{}' is invalid; allowed: mean, median, min", o.time_stat);
  size_sweep(o.min_bytes, o.max_bytes, o.step_factor, o.step_bytes);  // validates the sweep
  world_timeout_ = world_.timeout();
  group_timeout_ = group_.timeout();
  world_.set_timeout(o.timeout);
  group_.set_timeout(o.timeout);
}

CommBench::~CommBench() {
  world_.set_timeout(world_timeout_);
  group_.set_timeout(group_timeout_);
}

double CommBench::combine_over_world(double seconds) {
  double v = seconds;
  switch (options_.average) {
    case 0: world_.broadcast(&v, 1, DType::kF64, 0); break;
    case 1: world_.all_reduce(&seconds, &v, 1, DType::kF64, ReduceOp::kAvg); break;
    case 2: world_.all_reduce(&seconds, &v, 1, DType::kF64, ReduceOp::kMin); break;
    case 3: world_.all_reduce(&seconds, &v, 1, DType::kF64, ReduceOp::kMax); break;
  }
  return v;
}

void CommBench::issue(const CommRun& run, Buffers& b, bool in_place, size_t shift) {
  const int r = group_.rank(), n = group_.size();
  const DType t = run.dtype;
  const int64_t count = b.geo.count;
  uint8_t* s = b.send.get() + shift;
  uint8_t* v = b.recv.get() + shift;
  const size_t block = size_t(count) * b.elem;
  switch (run.coll) {
    case Collective::kAllReduce: group_.all_reduce(in_place ? v : s, v, size_t(count), t, run.op); break;
    case Collective::kReduce: group_.reduce(in_place ? v : s, v, size_t(count), t, run.op, run.root); break;
    case Collective::kReduceScatter:
      if (in_place)
        group_.reduce_scatter(v, v + size_t(r) * block, size_t(count), t, run.op);
      else
        group_.reduce_scatter(s, v, size_t(count), t, run.op);
      break;
    case Collective::kAllGather: group_.all_gather(in_place ? v + size_t(r) * block : s, v, size_t(count), t); break;
    case Collective::kBroadcast: group_.broadcast(v, size_t(count), t, run.root); break;
    case Collective::kAllToAll: group_.all_to_all(s, v, size_t(count), t); break;
    case Collective::kAllToAllV:
      group_.all_to_all_v(s, b.sc.data(), b.sd.data(), v, b.rc.data(), b.rd.data(), t);
      break;
    case Collective::kSendRecv: {
      Request rq = group_.irecv(v, size_t(count), t, (r - 1 + n) % n, 0);
      Request sq = group_.isend(s, size_t(count), t, (r + 1) % n, 0);
      group_.wait(sq);
      group_.wait(rq);
      break;
    }
  }
}

int64_t CommBench::verify(const CommRun& run, Buffers& b, bool in_place, uint64_t seed) {
  const int r = group_.rank(), n = group_.size();
  const size_t e = b.elem;
  const int64_t count = b.geo.count;
  const VerifiableData data(run.dtype, run.op, collective_reduces(run.coll), n, seed);
  uint8_t* send = b.send.get();
  uint8_t* recv = b.recv.get();
  uint8_t* want = b.expected.get();
  // Stale results must not pass: the receive buffer starts as garbage.
  std::memset(recv, 0xA5, b.capacity);
  const bool drop = options_.fault == CommFault::kDropRank && r == n - 1;
  auto input = [&](uint8_t* buf, uint64_t first, int64_t elems) {
    if (drop)
      std::memset(buf, 0, size_t(elems) * e);
    else
      data.fill_input(buf, r, first, elems);
  };
  uint8_t* in = in_place ? recv : send;
  uint8_t* out = recv;  // where the checked result lands
  int64_t out_elems = 0;
  bool checked = true;
  switch (run.coll) {
    case Collective::kAllReduce:
    case Collective::kReduce:
      input(in, 0, count);
      data.fill_reduced(want, 0, count);
      out_elems = count;
      checked = run.coll == Collective::kAllReduce || r == run.root;
      break;
    case Collective::kReduceScatter:
      input(in, 0, count * n);
      data.fill_reduced(want, uint64_t(r) * uint64_t(count), count);
      if (in_place) out = recv + size_t(r) * size_t(count) * e;
      out_elems = count;
      break;
    case Collective::kAllGather:
      input(in_place ? recv + size_t(r) * size_t(count) * e : send, 0, count);
      for (int q = 0; q < n; ++q) data.fill_input(want + size_t(q) * size_t(count) * e, q, 0, count);
      out_elems = count * n;
      break;
    case Collective::kBroadcast:
      if (r == run.root) input(recv, 0, count);
      data.fill_input(want, run.root, 0, count);
      out_elems = count;
      break;
    case Collective::kAllToAll:
      input(send, 0, count * n);
      for (int q = 0; q < n; ++q)
        data.fill_input(want + size_t(q) * size_t(count) * e, q, uint64_t(r) * uint64_t(count), count);
      out_elems = count * n;
      break;
    case Collective::kAllToAllV:
      input(send, 0, b.a2av_send);
      for (int q = 0; q < n; ++q) {
        int64_t first = 0;  // where q's block for r starts in q's send buffer
        for (int p = 0; p < r; ++p) first += b.matrix[size_t(q) * size_t(n) + size_t(p)];
        data.fill_input(want + size_t(b.rd[size_t(q)]) * e, q, uint64_t(first), b.rc[size_t(q)]);
      }
      out_elems = b.a2av_recv;
      break;
    case Collective::kSendRecv:
      input(send, 0, count);
      data.fill_input(want, (r - 1 + n) % n, 0, count);
      out_elems = count;
      break;
  }
  issue(run, b, in_place, 0);
  if (options_.fault == CommFault::kOffByOne && r == n - 1 && checked && out_elems > 0) {
    const int64_t i = out_elems / 2;
    store_integer(out, i, int64_t(std::llround(load_as_double(out, i, run.dtype))) + 1, run.dtype);
  }
  int64_t wrong = checked ? count_mismatches(out, want, out_elems, run.dtype) : 0;
  int64_t total = 0;
  world_.all_reduce(&wrong, &total, 1, DType::kI64, ReduceOp::kSum);
  return total;
}

CommSample CommBench::measure(const CommRun& run, Buffers& b, bool in_place) {
  const CommBenchOptions& o = options_;
  CommSample sample;
  sample.ran = true;
  // The buffers are rotated so that successive operations touch different memory.
  const size_t total = run.coll == Collective::kAllToAllV
                           ? size_t(std::max(b.a2av_send, b.a2av_recv)) * b.elem
                           : size_t(std::max(b.geo.send_elems, b.geo.recv_elems)) * b.elem;
  const size_t steps = total ? std::max<size_t>(1, b.capacity / total) : 1;
  auto shift = [&](int64_t i) { return total * (size_t(i) % steps); };

  issue(run, b, in_place, 0);  // untimed, as nccl-tests does
  world_.barrier();
  std::vector<double> per_iter(size_t(o.iters));
  const double t0 = now_seconds();
  for (int it = 0; it < o.iters; ++it) {
    const double ti = now_seconds();
    for (int a = 0; a < o.agg_iters; ++a) issue(run, b, in_place, shift(int64_t(it) * o.agg_iters + a));
    per_iter[size_t(it)] = (now_seconds() - ti) / double(o.agg_iters);
  }
  double seconds = combine_over_world((now_seconds() - t0) / double(o.iters * o.agg_iters));
  std::vector<double> slowest(per_iter.size());
  world_.all_reduce(per_iter.data(), slowest.data(), slowest.size(), DType::kF64, ReduceOp::kMax);
  for (double& x : slowest) x *= 1e6;
  sample.iter_us = summarize(std::move(slowest));
  if (o.time_stat == "median") seconds = sample.iter_us.p50 * 1e-6;
  if (o.time_stat == "min") seconds = sample.iter_us.min * 1e-6;
  sample.time_us = seconds * 1e6;

  const int n = group_.size();
  if (run.coll == Collective::kAllToAllV) {
    if (seconds > 0) {
      sample.algbw = double(b.load.max_rank_elems) * double(b.elem) / 1e9 / seconds;
      sample.busbw = double(b.load.max_rank_remote_elems) * double(b.elem) / 1e9 / seconds;
    }
  } else {
    const Bandwidth bw = coll_bandwidth(run.coll, b.geo.count, b.elem, seconds, n);
    sample.algbw = bw.algbw;
    sample.busbw = bw.busbw;
  }

  if (o.check > 0) {
    sample.wrong = 0;
    ++rep_;
    for (int c = 0; c < o.check; ++c) {
      sample.wrong += verify(run, b, in_place, rep_ * 1000003u + uint64_t(c));
      if (sample.wrong) break;
    }
  }
  return sample;
}

CommRun CommBench::run(Collective c, DType t, ReduceOp op, const RowCallback& on_row) {
  const CommBenchOptions& o = options_;
  const int n = group_.size(), r = group_.rank();
  ZAYA_CHECK(comm_combination_valid(c, t, op), "{}: reduction op avg needs a floating-point type, got {}",
             collective_name(c), dtype_name(t));
  ZAYA_CHECK(c != Collective::kSendRecv || n >= 2, "send_recv needs at least 2 ranks per group, this group has {}", n);
  if (collective_has_root(c))
    ZAYA_CHECK(o.root >= 0 && o.root < n, "root (-r) {} does not exist in a group of {} ranks", o.root, n);
  CommRun run;
  run.coll = c;
  run.dtype = t;
  run.has_op = collective_reduces(c);
  run.op = run.has_op ? op : ReduceOp::kSum;
  run.root = collective_has_root(c) ? o.root : -1;
  run.group_ranks = n;

  Buffers b;
  b.elem = dtype_bytes(t);
  const std::vector<uint64_t> sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor, o.step_bytes);
  TrafficMatrix matrix;
  if (c == Collective::kAllToAllV) {
    matrix = o.matrix ? *o.matrix : uniform_traffic_matrix(n);
    ZAYA_CHECK(matrix.n == n, "the traffic matrix from {} is {} x {}, but the group has {} ranks", matrix.source,
               matrix.n, matrix.n, n);
    run.matrix_source = matrix.source;
  }
  // Geometry of one size (all_to_all_v: from the scaled matrix).
  auto set_size = [&](uint64_t bytes) {
    b.geo = coll_geometry(c, bytes, b.elem, n);
    if (c != Collective::kAllToAllV) return;
    const int64_t per_rank = int64_t(bytes / b.elem);
    b.matrix = scale_traffic(matrix, per_rank);
    a2av_layout(b.matrix, n, r, b.sc, b.sd, b.rc, b.rd, b.a2av_send, b.a2av_recv);
    b.load = traffic_load(b.matrix, n);
    b.geo.count = per_rank / n;
    b.geo.size_bytes = uint64_t(per_rank) * b.elem;
  };
  set_size(sizes.back());
  b.capacity = c == Collective::kAllToAllV ? size_t(std::max(b.a2av_send, b.a2av_recv)) * b.elem
                                           : size_t(std::max(b.geo.send_elems, b.geo.recv_elems)) * b.elem;
  b.capacity = std::max<size_t>(b.capacity, size_t(sizes.back()));
  b.send = aligned_alloc_array<uint8_t>(b.capacity);
  b.recv = aligned_alloc_array<uint8_t>(b.capacity);
  b.expected = aligned_alloc_array<uint8_t>(b.capacity);
  std::memset(b.send.get(), 0, b.capacity);  // fault the pages in outside the timing
  std::memset(b.recv.get(), 0, b.capacity);
  std::memset(b.expected.get(), 0, b.capacity);

  if (o.fault == CommFault::kStall && !stalled_ && world_.rank() == world_.size() - 1) {
    stalled_ = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(o.stall_seconds));
  }
  // Warm-up at the largest and the smallest size.
  world_.barrier();
  const bool warm_in_place = !collective_has_out_of_place(c);
  for (uint64_t bytes : {sizes.back(), sizes.front()}) {
    set_size(bytes);
    for (int i = 0; i < o.warmup; ++i) issue(run, b, warm_in_place, 0);
  }
  if (c == Collective::kAllToAllV) run.imbalance = b.load.imbalance;

  for (uint64_t bytes : sizes) {
    set_size(bytes);
    CommRow row;
    row.size_bytes = b.geo.size_bytes;
    row.count = b.geo.count;
    if (collective_has_out_of_place(c)) row.out_of_place = measure(run, b, false);
    if (collective_has_in_place(c)) row.in_place = measure(run, b, true);
    run.rows.push_back(row);
    if (c == Collective::kAllToAllV) run.imbalance = b.load.imbalance;
    if (on_row) on_row(run, run.rows.back());
  }
  return run;
}

}  // namespace zaya
