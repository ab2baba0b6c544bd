#pragma once
// The communication layer: every collective and point-to-point operation the
// project uses, behind one interface, so that an NCCL/RCCL implementation can
// be added later next to the MPI one (docs/developer-guide.md, dist/). Semantics
// follow MPI / NCCL:
//
//   all_reduce      recv[i] = op over ranks of send[i]                  (count elements)
//   reduce          like all_reduce, result only on `root`
//   reduce_scatter  rank r gets op over ranks of send[r*count .. +count] (send holds size*count)
//   all_gather      recv[r*count .. +count] = send of rank r             (recv holds size*count)
//   broadcast       buf of `root` to every rank
//   all_to_all      rank r's block j goes to rank j's block r            (blocks of count elements)
//   all_to_all_v    the same with per-peer element counts and displacements
//   reduce_scatter_v  rank r gets op over ranks of send[displ(r) .. + counts[r]]
//                     (send holds sum(counts); displ(r) = counts[0] + ... + counts[r-1])
//   all_gather_v    recv[displ(r) .. + counts[r]] = send of rank r
//   send / recv     point to point, matched by (peer, tag)
//
// In-place use: pass send == recv for all_reduce; for reduce_scatter the
// receive block may lie inside send at offset rank*count; for all_gather the
// send block may lie inside recv at offset rank*count.
//
// Every operation can be bounded by a deadline (set_timeout), so that a rank
// that never arrives cannot hang the others (issue [ft]). Collectives run as
// the MPI library's blocking calls (its fastest algorithms; the non-blocking
// forms on a communication thread): one still running after the timeout ends
// the process with an error naming it, and the launcher stops the job.
// Point-to-point waits past the timeout throw zaya::Error instead.
// docs/distributed.md, "How collectives run".

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zaya {

enum class DType { kF32, kF64, kBF16, kF16, kI32, kI64, kU8 };
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };

size_t dtype_bytes(DType t);
const char* dtype_name(DType t);
const char* reduce_op_name(ReduceOp op);

// A non-blocking operation in flight; complete it with Comm::wait or poll with Comm::test.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
};
using Request = std::unique_ptr<CommRequest>;

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A name for messages, e.g. "world", "dp", "ep".
  virtual const std::string& name() const = 0;

  virtual void barrier() = 0;
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual void broadcast(void* buf, size_t count, DType dtype, int root) = 0;
  virtual void all_to_all(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual void all_to_all_v(const void* send, const int64_t* send_counts, const int64_t* send_displs, void* recv,
                            const int64_t* recv_counts, const int64_t* recv_displs, DType dtype) = 0;
  virtual void send(const void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void recv(void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  // Uneven blocks (counts[size()] elements per rank, consecutive in rank order).
  virtual void reduce_scatter_v(const void* send, void* recv, const int64_t* counts, DType dtype, ReduceOp op) {
    Request r = ireduce_scatter_v(send, recv, counts, dtype, op);
    wait(r);
  }
  virtual void all_gather_v(const void* send, void* recv, const int64_t* counts, DType dtype) {
    Request r = iall_gather_v(send, recv, counts, dtype);
    wait(r);
  }

  // Non-blocking versions: buffers must stay untouched until wait() returns.
  virtual Request iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual Request ireduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual Request iall_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  // `counts` must stay valid until the request completes.
  virtual Request ireduce_scatter_v(const void* send, void* recv, const int64_t* counts, DType dtype, ReduceOp op) = 0;
  virtual Request iall_gather_v(const void* send, void* recv, const int64_t* counts, DType dtype) = 0;
  virtual Request isend(const void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  virtual Request irecv(void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void wait(Request& request) = 0;
  // True when the request has completed (it is then released); drives progress.
  virtual bool test(Request& request) = 0;

  // Ranks with the same color form a new communicator, ordered by key.
  virtual std::unique_ptr<Comm> split(int color, int key, const std::string& name) = 0;

  // The same ranks, with blocking collectives that call the library at once:
  // no deadline, no ordering behind non-blocking work in flight (so none may
  // be). For `zaya bench comm --raw`, which shows the layer's own overhead.
  virtual std::unique_ptr<Comm> raw_view() = 0;

  // Bound on every blocking wait, in seconds (0: wait forever, the default).
  void set_timeout(double seconds) { timeout_seconds_ = seconds; }
  double timeout() const { return timeout_seconds_; }

 protected:
  double timeout_seconds_ = 0;
};

// A communicator of one rank (no MPI): collectives copy, send/recv fail.
std::unique_ptr<Comm> make_self_comm();

// True when this process was started by an MPI launcher (mpirun/mpiexec/srun
// with PMI), so the world communicator should be MPI's.
bool launched_by_mpi();

// This process's rank as the MPI launcher announced it (OMPI_COMM_WORLD_RANK,
// PMIX_RANK, PMI_RANK), readable before MPI starts; 0 when there is none. The
// program prints a command-line error on rank 0 alone with it.
int launcher_rank();

// MPI_COMM_WORLD (initialising MPI on first use; finalised at exit).
std::unique_ptr<Comm> make_mpi_world_comm();

// MPI's world when launched by MPI, else the self communicator.
std::unique_ptr<Comm> make_world_comm();

// Stops every rank: MPI_Abort when MPI is running, else exit. Used when one
// rank hits an error the others cannot learn about (they would otherwise hang).
[[noreturn]] void abort_world(int code);

}  // namespace zaya
