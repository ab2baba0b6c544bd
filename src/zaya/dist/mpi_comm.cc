// The MPI implementation of Comm (Open MPI or MPICH; MPI-3 non-blocking
// collectives only). Every blocking call runs as its non-blocking form plus a
// wait, so that a deadline (Comm::set_timeout) can turn a missing rank into
// an error instead of a hang.
//
// Longer than other files on purpose: it is the only file that includes
// mpi.h (CMakeLists.txt builds it once per MPI implementation, as an object
// library), so every MPI call of the project lives here.
#include <mpi.h>
#include <sched.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/dist/comm.h"

namespace zaya {
namespace {

// MPI is initialised on first use and finalised when the process exits.
struct MpiRuntime {
  MpiRuntime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Only the main thread calls MPI (background threads write checkpoints, never communicate).
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        fail("MPI_Init_thread failed");
      owned = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && !finalized) MPI_Finalize();
  }
  bool owned = false;
};

MpiRuntime& runtime() {
  static MpiRuntime r;
  return r;
}

// Element-wise reductions on 16-bit floats, which MPI has no datatype for:
// the data travels as MPI_UINT16_T and these user operations combine it.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), int Kind>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    const float r = Kind == 0 ? x + y : Kind == 1 ? x * y : Kind == 2 ? (x < y ? x : y) : (x > y ? x : y);
    b[i] = FromFloat(r);
  }
}

template <bool Max>
void reduce_u8(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint8_t*>(in);
  auto* b = static_cast<uint8_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Max ? std::max(a[i], b[i]) : std::min(a[i], b[i]);
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kBF16: return MPI_UINT16_T;
    case DType::kF16: return MPI_UINT16_T;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16; }

MPI_Op mpi_op(DType t, ReduceOp op) {
  static MPI_Op bf16_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  static MPI_Op f16_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  const int kind = op == ReduceOp::kSum || op == ReduceOp::kAvg ? 0
                   : op == ReduceOp::kProd                      ? 1
                   : op == ReduceOp::kMin                       ? 2
                                                                : 3;
  if (t == DType::kBF16 || t == DType::kF16) {
    MPI_Op* ops = t == DType::kBF16 ? bf16_ops : f16_ops;
    if (ops[kind] == MPI_OP_NULL) {
      MPI_User_function* fns_bf16[4] = {
          reduce_16bit<bf16_to_float, float_to_bf16, 0>, reduce_16bit<bf16_to_float, float_to_bf16, 1>,
          reduce_16bit<bf16_to_float, float_to_bf16, 2>, reduce_16bit<bf16_to_float, float_to_bf16, 3>};
      MPI_User_function* fns_f16[4] = {
          reduce_16bit<f16_to_float, float_to_f16, 0>, reduce_16bit<f16_to_float, float_to_f16, 1>,
          reduce_16bit<f16_to_float, float_to_f16, 2>, reduce_16bit<f16_to_float, float_to_f16, 3>};
      MPI_Op_create(t == DType::kBF16 ? fns_bf16[kind] : fns_f16[kind], 1, &ops[kind]);
    }
    return ops[kind];
  }
  if (t == DType::kU8 && (kind == 2 || kind == 3)) {
    // MPICH 4.0.2 (Debian 12) compares MPI_UINT8_T and MPI_UNSIGNED_CHAR as
    // signed in MPI_MIN/MPI_MAX (max(200, 10) = 10); our own op is right everywhere.
    static MPI_Op u8_ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
    if (u8_ops[kind - 2] == MPI_OP_NULL)
      MPI_Op_create(kind == 2 ? reduce_u8<false> : reduce_u8<true>, 1, &u8_ops[kind - 2]);
    return u8_ops[kind - 2];
  }
  static const MPI_Op builtin[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  return builtin[kind];
}

// x /= n on `count` elements (the second half of ReduceOp::kAvg).
void divide(void* buf, size_t count, DType t, int n) {
  switch (t) {
    case DType::kF32:
      for (size_t i = 0; i < count; ++i) static_cast<float*>(buf)[i] /= float(n);
      break;
    case DType::kF64:
      for (size_t i = 0; i < count; ++i) static_cast<double*>(buf)[i] /= double(n);
      break;
    case DType::kBF16: {
      uint16_t* b = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) b[i] = float_to_bf16(bf16_to_float(b[i]) / float(n));
      break;
    }
    case DType::kF16: {
      uint16_t* b = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) b[i] = float_to_f16(f16_to_float(b[i]) / float(n));
      break;
    }
    default: fail("ReduceOp avg needs a floating-point type, got {}", dtype_name(t));
  }
}

struct MpiRequest : CommRequest {
  MPI_Request request = MPI_REQUEST_NULL;
  // After completion: move move_bytes from move_from to move_to (in-place
  // reduce-scatter leaves MPI's result at the buffer start), then divide
  // avg_buf by the rank count (ReduceOp::kAvg).
  const void* move_from = nullptr;
  void* move_to = nullptr;
  size_t move_bytes = 0;
  void* avg_buf = nullptr;
  size_t avg_count = 0;
  DType avg_type = DType::kF32;
  std::vector<int> counts;  // int counts/displacements of v-collectives, alive until completion
  const char* what = "";
};

int checked_count(size_t count, const char* what) {
  ZAYA_CHECK(count <= size_t(INT_MAX), "{}: {} elements exceed MPI's int count limit", what, count);
  return int(count);
}

class MpiComm : public Comm {
 public:
  MpiComm(MPI_Comm comm, bool owned, std::string name) : comm_(comm), owned_(owned), name_(std::move(name)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void barrier() override {
    MpiRequest r;
    r.what = "barrier";
    check(MPI_Ibarrier(comm_, &r.request), "barrier");
    finish(r);
  }

  void all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    // Chunked, so counts beyond INT_MAX work too.
    const size_t chunk = size_t(INT_MAX) / 2, bytes = dtype_bytes(t);
    for (size_t done = 0; done < count || (count == 0 && done == 0); done += chunk) {
      const size_t n = std::min(chunk, count - done);
      auto r = start_all_reduce(send == recv ? recv : static_cast<const char*>(send) + done * bytes,
                                static_cast<char*>(recv) + done * bytes, n, t, op, send == recv);
      finish(*r);
      if (count == 0) break;
    }
  }

  void reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, int root) override {
    check_root(root);
    MpiRequest r;
    r.what = "reduce";
    const void* s = (send == recv && rank_ == root) ? MPI_IN_PLACE : send;
    check(MPI_Ireduce(s, recv, checked_count(count, "reduce"), mpi_type(t), mpi_op(t, op), root, comm_, &r.request),
          "reduce");
    if (op == ReduceOp::kAvg && rank_ == root) set_avg(r, recv, count, t);
    finish(r);
  }

  void reduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    auto r = ireduce_scatter(send, recv, count, t, op);
    wait(r);
  }

  void all_gather(const void* send, void* recv, size_t count, DType t) override {
    auto r = iall_gather(send, recv, count, t);
    wait(r);
  }

  void broadcast(void* buf, size_t count, DType t, int root) override {
    check_root(root);
    const size_t chunk = size_t(INT_MAX) / 2, bytes = dtype_bytes(t);
    for (size_t done = 0; done < count; done += chunk) {
      MpiRequest r;
      r.what = "broadcast";
      check(MPI_Ibcast(static_cast<char*>(buf) + done * bytes, int(std::min(chunk, count - done)), mpi_type(t), root,
                       comm_, &r.request),
            "broadcast");
      finish(r);
    }
  }

  void all_to_all(const void* send, void* recv, size_t count, DType t) override {
    MpiRequest r;
    r.what = "all_to_all";
    check(MPI_Ialltoall(send, checked_count(count, "all_to_all"), mpi_type(t), recv, int(count), mpi_type(t), comm_,
                        &r.request),
          "all_to_all");
    finish(r);
  }

  void all_to_all_v(const void* send, const int64_t* sc, const int64_t* sd, void* recv, const int64_t* rc,
                    const int64_t* rd, DType t) override {
    counts_.resize(4 * size_t(size_));
    int* c = counts_.data();
    for (int i = 0; i < size_; ++i) {
      c[i] = checked_count(size_t(sc[i]), "all_to_all_v send count");
      c[size_ + i] = checked_count(size_t(sd[i]), "all_to_all_v send displacement");
      c[2 * size_ + i] = checked_count(size_t(rc[i]), "all_to_all_v receive count");
      c[3 * size_ + i] = checked_count(size_t(rd[i]), "all_to_all_v receive displacement");
    }
    MpiRequest r;
    r.what = "all_to_all_v";
    check(MPI_Ialltoallv(send, c, c + size_, mpi_type(t), recv, c + 2 * size_, c + 3 * size_, mpi_type(t), comm_,
                         &r.request),
          "all_to_all_v");
    finish(r);
  }

  void send(const void* buf, size_t count, DType t, int peer, int tag) override {
    auto r = isend(buf, count, t, peer, tag);
    wait(r);
  }
  void recv(void* buf, size_t count, DType t, int peer, int tag) override {
    auto r = irecv(buf, count, t, peer, tag);
    wait(r);
  }

  Request iall_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    return start_all_reduce(send, recv, checked_count(count, "all_reduce"), t, op, send == recv);
  }

  Request ireduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    auto r = std::make_unique<MpiRequest>();
    r->what = "reduce_scatter";
    const size_t bytes = dtype_bytes(t);
    const bool in_place = static_cast<const char*>(send) + size_t(rank_) * count * bytes == recv;
    // With MPI_IN_PLACE the input is the whole receive buffer and the result
    // lands at its start; our contract puts it at block `rank`, so move it there.
    void* whole = const_cast<void*>(send);
    check(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : send, in_place ? whole : recv,
                                    checked_count(count, "reduce_scatter"), mpi_type(t), mpi_op(t, op), comm_,
                                    &r->request),
          "reduce_scatter");
    if (in_place && rank_ != 0) {
      r->move_from = whole;
      r->move_to = recv;
      r->move_bytes = count * bytes;
    }
    if (op == ReduceOp::kAvg) set_avg(*r, recv, count, t);
    return r;
  }

  Request iall_gather(const void* send, void* recv, size_t count, DType t) override {
    auto r = std::make_unique<MpiRequest>();
    r->what = "all_gather";
    const bool in_place = static_cast<const char*>(recv) + size_t(rank_) * count * dtype_bytes(t) == send;
    check(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, checked_count(count, "all_gather"), mpi_type(t), recv,
                         int(count), mpi_type(t), comm_, &r->request),
          "all_gather");
    return r;
  }

  Request ireduce_scatter_v(const void* send, void* recv, const int64_t* counts, DType t, ReduceOp op) override {
    auto r = std::make_unique<MpiRequest>();
    r->what = "reduce_scatter_v";
    r->counts.resize(size_t(size_));
    int64_t total = 0;
    for (int i = 0; i < size_; ++i) {
      r->counts[i] = checked_count(size_t(counts[i]), "reduce_scatter_v count");
      total += counts[i];
    }
    checked_count(size_t(total), "reduce_scatter_v total");
    check(MPI_Ireduce_scatter(send, recv, r->counts.data(), mpi_type(t), mpi_op(t, op), comm_, &r->request),
          "reduce_scatter_v");
    if (op == ReduceOp::kAvg) set_avg(*r, recv, size_t(counts[rank_]), t);
    return r;
  }

  Request iall_gather_v(const void* send, void* recv, const int64_t* counts, DType t) override {
    auto r = std::make_unique<MpiRequest>();
    r->what = "all_gather_v";
    r->counts.resize(2 * size_t(size_));
    int64_t displ = 0;
    for (int i = 0; i < size_; ++i) {
      r->counts[i] = checked_count(size_t(counts[i]), "all_gather_v count");
      r->counts[size_ + i] = checked_count(size_t(displ), "all_gather_v displacement");
      displ += counts[i];
    }
    const bool in_place = static_cast<const char*>(recv) + size_t(r->counts[size_ + rank_]) * dtype_bytes(t) == send;
    check(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : send, r->counts[rank_], mpi_type(t), recv, r->counts.data(),
                          r->counts.data() + size_, mpi_type(t), comm_, &r->request),
          "all_gather_v");
    return r;
  }

  Request isend(const void* buf, size_t count, DType t, int peer, int tag) override {
    check_peer(peer);
    auto r = std::make_unique<MpiRequest>();
    r->what = "send";
    check(MPI_Isend(buf, checked_count(count, "send"), mpi_type(t), peer, tag, comm_, &r->request), "send");
    return r;
  }

  Request irecv(void* buf, size_t count, DType t, int peer, int tag) override {
    check_peer(peer);
    auto r = std::make_unique<MpiRequest>();
    r->what = "recv";
    check(MPI_Irecv(buf, checked_count(count, "recv"), mpi_type(t), peer, tag, comm_, &r->request), "recv");
    return r;
  }

  void wait(Request& request) override {
    if (!request) return;
    finish(static_cast<MpiRequest&>(*request));
    request.reset();
  }

  bool test(Request& request) override {
    if (!request) return true;
    auto& r = static_cast<MpiRequest&>(*request);
    int done = 0;
    check(MPI_Test(&r.request, &done, MPI_STATUS_IGNORE), r.what);
    if (!done) return false;
    complete(r);
    request.reset();
    return true;
  }

  std::unique_ptr<Comm> split(int color, int key, const std::string& name) override {
    MPI_Comm out;
    check(MPI_Comm_split(comm_, color, key, &out), "split");
    return std::make_unique<MpiComm>(out, true, name);
  }

 private:
  std::unique_ptr<MpiRequest> start_all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op,
                                               bool in_place) {
    auto r = std::make_unique<MpiRequest>();
    r->what = "all_reduce";
    check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : send, recv, int(count), mpi_type(t), mpi_op(t, op), comm_,
                         &r->request),
          "all_reduce");
    if (op == ReduceOp::kAvg) set_avg(*r, recv, count, t);
    return r;
  }

  void set_avg(MpiRequest& r, void* buf, size_t count, DType t) {
    ZAYA_CHECK(is_float(t), "{}: ReduceOp avg needs a floating-point type, got {}", r.what, dtype_name(t));
    r.avg_buf = buf;
    r.avg_count = count;
    r.avg_type = t;
  }

  // Waits for the request, bounded by the communicator's timeout.
  void finish(MpiRequest& r) {
    if (timeout_seconds_ <= 0) {
      check(MPI_Wait(&r.request, MPI_STATUS_IGNORE), r.what);
    } else {
      const double deadline = now_seconds() + timeout_seconds_;
      int done = 0;
      for (;;) {
        check(MPI_Test(&r.request, &done, MPI_STATUS_IGNORE), r.what);
        if (done) break;
        if (now_seconds() > deadline)
          fail(
              "{} on communicator '{}' (rank {} of {}) did not complete within {} s: a rank is missing, hung or "
              "failed",
              r.what, name_, rank_, size_, timeout_seconds_);
        sched_yield();
      }
    }
    complete(r);
  }

  void complete(MpiRequest& r) {
    if (r.move_bytes) std::memmove(r.move_to, r.move_from, r.move_bytes);
    if (r.avg_buf) divide(r.avg_buf, r.avg_count, r.avg_type, size_);
  }

  void check(int rc, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fail("MPI {} failed on communicator '{}' (rank {} of {}): {}", what, name_, rank_, size_, std::string(text, len));
  }
  void check_root(int root) const {
    ZAYA_CHECK(root >= 0 && root < size_, "root rank {} does not exist in '{}' ({} ranks)", root, name_, size_);
  }
  void check_peer(int peer) const {
    ZAYA_CHECK(peer >= 0 && peer < size_, "peer rank {} does not exist in '{}' ({} ranks)", peer, name_, size_);
  }

  MPI_Comm comm_;
  bool owned_;
  std::string name_;
  int rank_ = 0, size_ = 1;
  std::vector<int> counts_;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_world_comm() {
  runtime();
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false, "world");
}

void abort_world(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace zaya
