#include "zaya/model/context_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "zaya/core/error.h"

namespace zaya {
namespace {

// Message tags on the cp communicator: + the receiving piece (0 or 1).
constexpr int kTagHaloForward = 0x7c00;
constexpr int kTagHaloBackward = 0x7c10;

// Chunk held as piece p by cp rank q.
int chunk_of_rank(const ContextParallel& cp, int q, int p) { return p == 0 ? q : 2 * cp.size - 1 - q; }

// The last h = cp.halo rows of piece p of every sequence <-> buf [B][h][P].
void pack_tail(const ContextParallel& cp, const float* x_TP, int64_t B, int64_t P, int p, float* buf) {
  const int64_t L = cp.local_seq(), c = cp.chunk, h = cp.halo;
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(buf + b * h * P, x_TP + (b * L + p * c + c - h) * P, sizeof(float) * h * P);
}
void add_into_tail(const ContextParallel& cp, const float* buf, int64_t B, int64_t P, int p, float* x_TP) {
  const int64_t L = cp.local_seq(), c = cp.chunk, h = cp.halo;
  for (int64_t b = 0; b < B; ++b) {
    float* dst = x_TP + (b * L + p * c + c - h) * P;
    const float* src = buf + b * h * P;
    for (int64_t i = 0; i < h * P; ++i) dst[i] += src[i];
  }
}

}  // namespace

ContextParallel make_context_parallel(Comm& comm, int64_t seq, int64_t halo) {
  ContextParallel cp;
  cp.comm = &comm;
  cp.size = comm.size();
  cp.rank = comm.rank();
  ZAYA_ASSERT(halo >= 1);
  cp.halo = halo;
  const int64_t least = std::max<int64_t>(2, halo);
  ZAYA_CHECK(seq % (2 * cp.size) == 0 && seq / (2 * cp.size) >= least,
             "context parallelism over {} ranks cuts each sequence into {} chunks of at least {} tokens{}: the "
             "sequence length ({}) must be a multiple of {} and at least {}",
             cp.size, 2 * cp.size, least,
             halo > 2 ? fmt::format(" (the halo of {} rows that cca_time0 + cca_time1 - 2 asks for)", halo) : "", seq,
             2 * cp.size, least * 2 * cp.size);
  cp.chunk = seq / (2 * cp.size);
  return cp;
}

void cp_local_positions(const ContextParallel& cp, int32_t* pos_S) {
  for (int p = 0; p < 2; ++p)
    for (int64_t i = 0; i < cp.chunk; ++i) pos_S[p * cp.chunk + i] = int32_t(cp.chunk_of(p) * cp.chunk + i);
}

void cp_take_local(const ContextParallel& cp, const int32_t* full_BS, int32_t* local_BS, int64_t B) {
  const int64_t S = cp.full_seq(), L = cp.local_seq(), c = cp.chunk;
  for (int64_t b = 0; b < B; ++b)
    for (int p = 0; p < 2; ++p)
      std::memcpy(local_BS + b * L + p * c, full_BS + b * S + cp.chunk_of(p) * c, sizeof(int32_t) * c);
}

void cp_halo_forward(const ContextParallel& cp, const float* qkv_TP, int64_t B, int64_t P, float* hist_2B2P,
                     float* send, float* recv) {
  const int last = 2 * cp.size - 1;
  const int64_t h = cp.halo;
  const size_t n = size_t(B * h * P);
  std::vector<Request> pending;
  for (int p = 0; p < 2; ++p) {  // receive the rows before each piece
    const int ch = cp.chunk_of(p);
    float* into = recv + p * n;
    if (ch == 0) {
      std::memset(into, 0, sizeof(float) * n);  // a sequence start: zero padding
    } else if (cp.owner(ch - 1) != cp.rank) {
      pending.push_back(cp.comm->irecv(into, n, DType::kF32, cp.owner(ch - 1), kTagHaloForward + p));
    }
  }
  for (int p = 0; p < 2; ++p) {  // send each piece's last h rows to the next chunk's owner
    const int ch = cp.chunk_of(p);
    if (ch == last) continue;
    float* buf = send + p * n;
    pack_tail(cp, qkv_TP, B, P, p, buf);
    const int to = cp.owner(ch + 1), to_piece = cp.piece_of(ch + 1);
    if (to == cp.rank) {
      std::memcpy(recv + to_piece * n, buf, sizeof(float) * n);
    } else {
      pending.push_back(cp.comm->isend(buf, n, DType::kF32, to, kTagHaloForward + to_piece));
    }
  }
  for (Request& r : pending) cp.comm->wait(r);
  for (int64_t b = 0; b < B; ++b)
    for (int p = 0; p < 2; ++p)
      std::memcpy(hist_2B2P + (b * 2 + p) * h * P, recv + p * n + b * h * P, sizeof(float) * h * P);
}

void cp_halo_backward(const ContextParallel& cp, const float* dhist_2B2P, float* dqkv_TP, int64_t B, int64_t P,
                      float* send, float* recv) {
  const int last = 2 * cp.size - 1;
  const int64_t h = cp.halo;
  const size_t n = size_t(B * h * P);
  std::vector<Request> pending;
  bool received[2] = {false, false};
  for (int p = 0; p < 2; ++p) {  // gradients of this piece's last rows, from the next chunk's owner
    const int ch = cp.chunk_of(p);
    if (ch == last || cp.owner(ch + 1) == cp.rank) continue;
    pending.push_back(cp.comm->irecv(recv + p * n, n, DType::kF32, cp.owner(ch + 1), kTagHaloBackward + p));
    received[p] = true;
  }
  for (int p = 0; p < 2; ++p) {  // this piece's history gradient goes back to the previous chunk's owner
    const int ch = cp.chunk_of(p);
    if (ch == 0) continue;
    float* buf = send + p * n;
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(buf + b * h * P, dhist_2B2P + (b * 2 + p) * h * P, sizeof(float) * h * P);
    const int to = cp.owner(ch - 1), to_piece = cp.piece_of(ch - 1);
    if (to == cp.rank) {
      std::memcpy(recv + to_piece * n, buf, sizeof(float) * n);
      received[to_piece] = true;
    } else {
      pending.push_back(cp.comm->isend(buf, n, DType::kF32, to, kTagHaloBackward + to_piece));
    }
  }
  for (Request& r : pending) cp.comm->wait(r);
  for (int p = 0; p < 2; ++p)
    if (received[p]) add_into_tail(cp, recv + p * n, B, P, p, dqkv_TP);
}

Request cp_gather_begin(const ContextParallel& cp, const float* x_TK, int64_t B, int64_t K, float* stage) {
  return cp.comm->iall_gather(x_TK, stage, size_t(B * cp.local_seq() * K), DType::kF32);
}

void cp_gather_end(const ContextParallel& cp, Request& request, const float* stage, float* full_BSK, int64_t B,
                   int64_t K) {
  cp.comm->wait(request);
  const int64_t S = cp.full_seq(), L = cp.local_seq(), c = cp.chunk;
  // stage [rank q][b][piece p][i][K] -> full [b][chunk_of(q, p) * c + i][K]
  for (int q = 0; q < cp.size; ++q)
    for (int64_t b = 0; b < B; ++b)
      for (int p = 0; p < 2; ++p)
        std::memcpy(full_BSK + (b * S + chunk_of_rank(cp, q, p) * c) * K, stage + ((q * B + b) * L + p * c) * K,
                    sizeof(float) * c * K);
}

void cp_reduce_scatter(const ContextParallel& cp, const float* dfull_BSK, float* dx_TK, int64_t B, int64_t K,
                       float* stage) {
  const int64_t S = cp.full_seq(), L = cp.local_seq(), c = cp.chunk;
  for (int q = 0; q < cp.size; ++q)
    for (int64_t b = 0; b < B; ++b)
      for (int p = 0; p < 2; ++p)
        std::memcpy(stage + ((q * B + b) * L + p * c) * K, dfull_BSK + (b * S + chunk_of_rank(cp, q, p) * c) * K,
                    sizeof(float) * c * K);
  cp.comm->reduce_scatter(stage, dx_TK, size_t(B * L * K), DType::kF32, ReduceOp::kSum);
}

}  // namespace zaya
