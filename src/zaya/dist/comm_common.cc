#include <cstdlib>
#include <cstring>

#include "zaya/core/error.h"
#include "zaya/dist/comm.h"

namespace zaya {

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "half";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kU8: return "uint8";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var); v != nullptr) return std::atoi(v);
  return 0;
}

std::unique_ptr<Comm> make_world_comm() { return launched_by_mpi() ? make_mpi_world_comm() : make_self_comm(); }

namespace {

// One rank: every collective is a copy (or nothing), point to point has no peer.
class SelfComm : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  void barrier() override {}
  void all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp) override { copy(s, r, n, t); }
  void reduce(const void* s, void* r, size_t n, DType t, ReduceOp, int root) override {
    check_root(root);
    copy(s, r, n, t);
  }
  void reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp) override { copy(s, r, n, t); }
  void all_gather(const void* s, void* r, size_t n, DType t) override { copy(s, r, n, t); }
  void broadcast(void*, size_t, DType, int root) override { check_root(root); }
  void all_to_all(const void* s, void* r, size_t n, DType t) override { copy(s, r, n, t); }
  void all_to_all_v(const void* s, const int64_t* sc, const int64_t* sd, void* r, const int64_t* rc, const int64_t* rd,
                    DType t) override {
    ZAYA_CHECK(sc[0] == rc[0], "all_to_all_v on one rank: send count {} != receive count {}", sc[0], rc[0]);
    copy(static_cast<const char*>(s) + sd[0] * dtype_bytes(t), static_cast<char*>(r) + rd[0] * dtype_bytes(t),
         size_t(sc[0]), t);
  }
  void send(const void*, size_t, DType, int peer, int) override { no_peer(peer); }
  void recv(void*, size_t, DType, int peer, int) override { no_peer(peer); }
  Request iall_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override {
    all_reduce(s, r, n, t, op);
    return nullptr;
  }
  Request ireduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override {
    reduce_scatter(s, r, n, t, op);
    return nullptr;
  }
  Request iall_gather(const void* s, void* r, size_t n, DType t) override {
    all_gather(s, r, n, t);
    return nullptr;
  }
  Request ireduce_scatter_v(const void* s, void* r, const int64_t* counts, DType t, ReduceOp) override {
    copy(s, r, size_t(counts[0]), t);
    return nullptr;
  }
  Request iall_gather_v(const void* s, void* r, const int64_t* counts, DType t) override {
    copy(s, r, size_t(counts[0]), t);
    return nullptr;
  }
  Request isend(const void*, size_t, DType, int peer, int) override { no_peer(peer); }
  Request irecv(void*, size_t, DType, int peer, int) override { no_peer(peer); }
  void wait(Request& r) override { r.reset(); }
  bool test(Request& r) override {
    r.reset();
    return true;
  }
  std::unique_ptr<Comm> split(int, int, const std::string& n) override {
    auto c = std::make_unique<SelfComm>();
    c->name_ = n;
    return c;
  }
  std::unique_ptr<Comm> raw_view() override { return split(0, 0, name_); }

 private:
  static void copy(const void* s, void* r, size_t n, DType t) {
    if (s != r) std::memmove(r, s, n * dtype_bytes(t));
  }
  static void check_root(int root) { ZAYA_CHECK(root == 0, "root rank {} does not exist (1 rank)", root); }
  [[noreturn]] static void no_peer(int peer) { fail("rank {} does not exist: this is a single-process run", peer); }
  std::string name_ = "world";
};

}  // namespace

std::unique_ptr<Comm> make_self_comm() { return std::make_unique<SelfComm>(); }

}  // namespace zaya
