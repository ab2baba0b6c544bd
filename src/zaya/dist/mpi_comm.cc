// The MPI implementation of Comm (Open MPI or MPICH). Collectives are the
// library's blocking calls, so they run with its tuned algorithms
// (docs/distributed.md, "How collectives run"):
//   blocking collectives  on the calling thread, after the non-blocking work
//                         posted before them (CommWorker::drain), bounded by
//                         the watchdog (comm_watchdog.h), which ends the
//                         process after the communicator's timeout
//   non-blocking ones     the same blocking call as a task of the communication
//                         thread (comm_worker.h), which progresses it while the
//                         caller computes; wait() waits for the task
//   point to point        MPI_Isend / MPI_Irecv polled with MPI_Test against
//                         the deadline, which throws zaya::Error (these are the
//                         same calls as blocking send/recv in both libraries)
// MPI runs at MPI_THREAD_SERIALIZED: only one thread is ever inside MPI.
//
// The only files that include mpi.h are dist/mpi_*.cc (CMakeLists.txt builds
// them once per MPI implementation, as an object library), so every MPI call
// of the project lives in them: this one, the communicator; mpi_runtime.cc,
// MPI's start and end in the process; mpi_types.cc, datatypes and reductions.
#include <mpi.h>
#include <sched.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <cstdio>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/core/timer.h"
#include "zaya/dist/comm.h"
#include "zaya/dist/comm_watchdog.h"
#include "zaya/dist/comm_worker.h"
#include "zaya/dist/mpi_runtime.h"
#include "zaya/dist/mpi_types.h"

namespace zaya {
namespace {

using mpi::divide;
using mpi::is_float;
using mpi::mpi_op;
using mpi::mpi_type;
using mpi::MpiRuntime;
using mpi::runtime;

struct MpiRequest : CommRequest {
  MPI_Request request = MPI_REQUEST_NULL;  // point to point
  CommWorker::TaskPtr task;                // a collective on the communication thread
  const char* what = "";
};

int checked_count(size_t count, const char* what) {
  ZAYA_CHECK(count <= size_t(INT_MAX), "{}: {} elements exceed MPI's int count limit", what, count);
  return int(count);
}

constexpr int kCallerSlot = 0, kWorkerSlot = 1;  // watchdog slots

class MpiComm : public Comm {
 public:
  // `raw`: a view whose blocking collectives call MPI at once, with no
  // ordering against posted work and no deadline (Comm::raw_view).
  MpiComm(MPI_Comm comm, bool owned, std::string name, bool raw = false)
      : comm_(comm), owned_(owned), raw_(raw), name_(std::move(name)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (!raw_) runtime().worker->drain();  // tasks may still use this communicator
    if (owned_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void barrier() override {
    blocking("barrier", [&] { check(MPI_Barrier(comm_), "barrier"); });
  }

  void all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    check_op(t, op, "all_reduce");
    blocking("all_reduce", [&] { do_all_reduce(send, recv, count, t, op); });
  }

  void reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, int root) override {
    check_root(root);
    check_op(t, op, "reduce");
    blocking("reduce", [&] {
      const void* s = (send == recv && rank_ == root) ? MPI_IN_PLACE : send;
#ifdef MPICH_VERSION
      // MPICH 4.0.2 (Debian 12) crashes in a blocking MPI_Reduce with
      // MPI_IN_PLACE at a root other than 0 (3 ranks, 1024 floats: it reads
      // MPI_IN_PLACE as a buffer); the root reduces from a copy instead.
      std::vector<char> copy;
      if (s == MPI_IN_PLACE && root != 0) {
        copy.assign(static_cast<const char*>(recv), static_cast<const char*>(recv) + count * dtype_bytes(t));
        s = copy.data();
      }
#endif
      check(MPI_Reduce(s, recv, checked_count(count, "reduce"), mpi_type(t), mpi_op(t, op), root, comm_), "reduce");
      if (op == ReduceOp::kAvg && rank_ == root) average(recv, count, t, "reduce");
    });
  }

  void reduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    checked_count(count, "reduce_scatter");
    check_op(t, op, "reduce_scatter");
    blocking("reduce_scatter", [&] { do_reduce_scatter(send, recv, count, t, op); });
  }

  void all_gather(const void* send, void* recv, size_t count, DType t) override {
    checked_count(count, "all_gather");
    blocking("all_gather", [&] { do_all_gather(send, recv, count, t); });
  }

  void broadcast(void* buf, size_t count, DType t, int root) override {
    check_root(root);
    blocking("broadcast", [&] {
      const size_t chunk = size_t(INT_MAX) / 2, bytes = dtype_bytes(t);
      for (size_t done = 0; done < count; done += chunk)
        check(MPI_Bcast(static_cast<char*>(buf) + done * bytes, int(std::min(chunk, count - done)), mpi_type(t), root,
                        comm_),
              "broadcast");
    });
  }

  void all_to_all(const void* send, void* recv, size_t count, DType t) override {
    const int n = checked_count(count, "all_to_all");
    blocking("all_to_all",
             [&] { check(MPI_Alltoall(send, n, mpi_type(t), recv, n, mpi_type(t), comm_), "all_to_all"); });
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
    blocking("all_to_all_v", [&] {
      check(MPI_Alltoallv(send, c, c + size_, mpi_type(t), recv, c + 2 * size_, c + 3 * size_, mpi_type(t), comm_),
            "all_to_all_v");
    });
  }

  void reduce_scatter_v(const void* send, void* recv, const int64_t* counts, DType t, ReduceOp op) override {
    std::vector<int> c = int_counts(counts, "reduce_scatter_v");
    check_op(t, op, "reduce_scatter_v");
    blocking("reduce_scatter_v", [&] { do_reduce_scatter_v(send, recv, c, t, op); });
  }

  void all_gather_v(const void* send, void* recv, const int64_t* counts, DType t) override {
    std::vector<int> c = gather_layout(counts);
    blocking("all_gather_v", [&] { do_all_gather_v(send, recv, c, t); });
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
    checked_count(count, "all_reduce");
    check_op(t, op, "all_reduce");
    return post("all_reduce", [=, this] { do_all_reduce(send, recv, count, t, op); });
  }

  Request ireduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op) override {
    checked_count(count, "reduce_scatter");
    check_op(t, op, "reduce_scatter");
    return post("reduce_scatter", [=, this] { do_reduce_scatter(send, recv, count, t, op); });
  }

  Request iall_gather(const void* send, void* recv, size_t count, DType t) override {
    checked_count(count, "all_gather");
    return post("all_gather", [=, this] { do_all_gather(send, recv, count, t); });
  }

  Request ireduce_scatter_v(const void* send, void* recv, const int64_t* counts, DType t, ReduceOp op) override {
    std::vector<int> c = int_counts(counts, "reduce_scatter_v");
    check_op(t, op, "reduce_scatter_v");
    return post("reduce_scatter_v", [=, this, c = std::move(c)] { do_reduce_scatter_v(send, recv, c, t, op); });
  }

  Request iall_gather_v(const void* send, void* recv, const int64_t* counts, DType t) override {
    std::vector<int> c = gather_layout(counts);
    return post("all_gather_v", [=, this, c = std::move(c)] { do_all_gather_v(send, recv, c, t); });
  }

  Request isend(const void* buf, size_t count, DType t, int peer, int tag) override {
    check_peer(peer);
    auto r = std::make_unique<MpiRequest>();
    r->what = "send";
    runtime().worker->drain();
    check(MPI_Isend(buf, checked_count(count, "send"), mpi_type(t), peer, tag, comm_, &r->request), "send");
    return r;
  }

  Request irecv(void* buf, size_t count, DType t, int peer, int tag) override {
    check_peer(peer);
    auto r = std::make_unique<MpiRequest>();
    r->what = "recv";
    runtime().worker->drain();
    check(MPI_Irecv(buf, checked_count(count, "recv"), mpi_type(t), peer, tag, comm_, &r->request), "recv");
    return r;
  }

  void wait(Request& request) override {
    if (!request) return;
    auto& r = static_cast<MpiRequest&>(*request);
    if (r.task) {
      CommWorker::TaskPtr task = std::move(r.task);
      request.reset();
      runtime().worker->wait(*task);  // the communication thread's watchdog slot bounds it
      return;
    }
    if (r.request != MPI_REQUEST_NULL) finish_point_to_point(r);
    request.reset();
  }

  bool test(Request& request) override {
    if (!request) return true;
    auto& r = static_cast<MpiRequest&>(*request);
    if (r.task) {
      if (!r.task->done()) return false;
      wait(request);
      return true;
    }
    if (r.request != MPI_REQUEST_NULL) {
      if (!runtime().worker->idle()) return false;  // MPI is busy on the communication thread
      int done = 0;
      check(MPI_Test(&r.request, &done, MPI_STATUS_IGNORE), r.what);
      if (!done) return false;
    }
    request.reset();
    return true;
  }

  std::unique_ptr<Comm> split(int color, int key, const std::string& name) override {
    MPI_Comm out;
    blocking("split", [&] { check(MPI_Comm_split(comm_, color, key, &out), "split"); });
    return std::make_unique<MpiComm>(out, true, name);
  }

  std::unique_ptr<Comm> raw_view() override { return std::make_unique<MpiComm>(comm_, false, name_, true); }

 private:
  // A blocking collective on this thread: after what was posted before it, within the deadline.
  template <typename Body>
  void blocking(const char* what, Body&& body) {
    if (raw_) return body();
    MpiRuntime& rt = runtime();
    rt.worker->drain();
    if (timeout_seconds_ <= 0) return body();
    CommWatchdog::Armed armed(rt.watchdog, kCallerSlot, timeout_seconds_, what, name_, rank_, size_);
    body();
  }

  // A non-blocking collective: the blocking call, as a task of the communication thread.
  Request post(const char* what, std::function<void()> body) {
    auto r = std::make_unique<MpiRequest>();
    r->what = what;
    MpiRuntime& rt = runtime();
    if (!rt.threaded || raw_) {
      blocking(what, body);
      return r;
    }
    const double timeout = timeout_seconds_;
    r->task = rt.worker->post([this, what, timeout, body = std::move(body)] {
      if (timeout <= 0) return body();
      CommWatchdog::Armed armed(runtime().watchdog, kWorkerSlot, timeout, what, name_, rank_, size_);
      body();
    });
    return r;
  }

  void do_all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
    // Chunked, so counts beyond INT_MAX work too.
    const size_t chunk = size_t(INT_MAX) / 2, bytes = dtype_bytes(t);
    const bool in_place = send == recv;
    for (size_t done = 0; done < count || (count == 0 && done == 0); done += chunk) {
      const size_t n = std::min(chunk, count - done);
      const void* s = in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + done * bytes;
      check(MPI_Allreduce(s, static_cast<char*>(recv) + done * bytes, int(n), mpi_type(t), mpi_op(t, op), comm_),
            "all_reduce");
      if (count == 0) break;
    }
    if (op == ReduceOp::kAvg) average(recv, count, t, "all_reduce");
  }

  void do_reduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
    const size_t bytes = dtype_bytes(t);
    const bool in_place = static_cast<const char*>(send) + size_t(rank_) * count * bytes == recv;
    // With MPI_IN_PLACE the input is the whole receive buffer and the result
    // lands at its start; our contract puts it at block `rank`, so move it there.
    void* whole = const_cast<void*>(send);
    check(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, in_place ? whole : recv, int(count), mpi_type(t),
                                   mpi_op(t, op), comm_),
          "reduce_scatter");
    if (in_place && rank_ != 0) std::memmove(recv, whole, count * bytes);
    if (op == ReduceOp::kAvg) average(recv, count, t, "reduce_scatter");
  }

  void do_all_gather(const void* send, void* recv, size_t count, DType t) {
    const bool in_place = static_cast<const char*>(recv) + size_t(rank_) * count * dtype_bytes(t) == send;
    check(MPI_Allgather(in_place ? MPI_IN_PLACE : send, int(count), mpi_type(t), recv, int(count), mpi_type(t), comm_),
          "all_gather");
  }

  void do_reduce_scatter_v(const void* send, void* recv, const std::vector<int>& c, DType t, ReduceOp op) {
    check(MPI_Reduce_scatter(send, recv, c.data(), mpi_type(t), mpi_op(t, op), comm_), "reduce_scatter_v");
    if (op == ReduceOp::kAvg) average(recv, size_t(c[size_t(rank_)]), t, "reduce_scatter_v");
  }

  // c: counts, then displacements.
  void do_all_gather_v(const void* send, void* recv, const std::vector<int>& c, DType t) {
    const int* displs = c.data() + size_;
    const bool in_place = static_cast<const char*>(recv) + size_t(displs[rank_]) * dtype_bytes(t) == send;
    check(MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, c[size_t(rank_)], mpi_type(t), recv, c.data(), displs,
                         mpi_type(t), comm_),
          "all_gather_v");
  }

  std::vector<int> int_counts(const int64_t* counts, const char* what) const {
    std::vector<int> c(static_cast<size_t>(size_));
    int64_t total = 0;
    for (int i = 0; i < size_; ++i) {
      c[size_t(i)] = checked_count(size_t(counts[i]), what);
      total += counts[i];
    }
    checked_count(size_t(total), what);
    return c;
  }

  // Counts and displacements of all_gather_v.
  std::vector<int> gather_layout(const int64_t* counts) const {
    std::vector<int> c(2 * size_t(size_));
    int64_t displ = 0;
    for (int i = 0; i < size_; ++i) {
      c[size_t(i)] = checked_count(size_t(counts[i]), "all_gather_v count");
      c[size_t(size_ + i)] = checked_count(size_t(displ), "all_gather_v displacement");
      displ += counts[i];
    }
    return c;
  }

  static void check_op(DType t, ReduceOp op, const char* what) {
    ZAYA_CHECK(op != ReduceOp::kAvg || is_float(t), "{}: ReduceOp avg needs a floating-point type, got {}", what,
               dtype_name(t));
  }
  // The second half of ReduceOp::kAvg (check_op has vetted the type).
  void average(void* buf, size_t count, DType t, const char*) { divide(buf, count, t, size_); }

  // Waits for a send or receive, bounded by the communicator's timeout (an error, not the end of the process).
  void finish_point_to_point(MpiRequest& r) {
    runtime().worker->drain();
    if (timeout_seconds_ <= 0 || raw_) {
      check(MPI_Wait(&r.request, MPI_STATUS_IGNORE), r.what);
      return;
    }
    const double deadline = now_seconds() + timeout_seconds_;
    int done = 0;
    for (;;) {
      check(MPI_Test(&r.request, &done, MPI_STATUS_IGNORE), r.what);
      if (done) return;
      if (now_seconds() > deadline)
        fail("{} on communicator '{}' (rank {} of {}) did not complete within {} s: a rank is missing, hung or failed",
             r.what, name_, rank_, size_, timeout_seconds_);
      sched_yield();
    }
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
  bool raw_;
  std::string name_;
  int rank_ = 0, size_ = 1;
  std::vector<int> counts_;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_world_comm() {
  runtime();
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false, "world");
}

}  // namespace zaya
