#pragma once
// Context parallelism for CCA attention (issue [cp]; docs/systems-notes.md §4-5: how
// ZAYA1 extended its context from 4K to 32K).
//
// The cp ranks of a group share the same B sequences of S tokens. Each
// sequence is cut into 2 * cp chunks of S / (2 cp) tokens, and rank r holds
// chunks r and 2cp - 1 - r ("zig-zag"): the first chunks attend to few keys,
// the last to many, so pairing them gives every rank the same causal
// attention work. A rank's rows, per sequence, are its two chunks ("pieces")
// one after the other; their positions increase, chunk r before chunk 2cp-1-r.
//
// Everything per token (norms, MoE, residuals, loss) runs on the local rows
// unchanged. Only CCA looks along the sequence, in three places:
//   - attention: keys and values of the whole sequence are all-gathered (and
//     their gradients reduce-scattered back to their owners in backward);
//   - the two causal convolutions read the H = cca_time0 + cca_time1 - 2
//     previous q/k rows (two for ZAYA1's kernels of 2 and 2);
//   - the delayed value stream reads the previous row's v_prev.
// The last two are a halo of the max(H, 1) fused-projection rows before each piece,
// sent by the owner of the previous chunk with non-blocking send/recv (their
// gradients travel back the same way). The paper sends the previous token's
// normed input and recomputes its projection; sending the projected rows is
// the same arithmetic in one smaller message per piece, and no extra GEMM.

#include <cstdint>
#include <vector>

#include "zaya/dist/comm.h"

namespace zaya {

struct ContextParallel {
  Comm* comm = nullptr;
  int size = 1;       // cp ranks
  int rank = 0;       // this rank in the cp group
  int64_t chunk = 0;  // tokens per chunk: S / (2 * size)
  int64_t halo = 2;   // rows before each piece it reads: max(1, cca_time0 + cca_time1 - 2)

  int64_t local_seq() const { return 2 * chunk; }
  int64_t full_seq() const { return 2 * size * chunk; }
  // The chunk that piece p (0 or 1) of this rank holds.
  int chunk_of(int piece) const { return piece == 0 ? rank : 2 * size - 1 - rank; }
  // The rank holding chunk ch, and which of its pieces it is.
  int owner(int ch) const { return ch < size ? ch : 2 * size - 1 - ch; }
  int piece_of(int ch) const { return ch < size ? 0 : 1; }
};

// The layout for sequences of `seq` tokens over `comm` with a halo of `halo`
// rows (conv_halo_rows in model/conv_taps.h); fails unless seq is a multiple of 2 * cp
// with at least max(2, halo) tokens per chunk (a halo comes from one chunk).
ContextParallel make_context_parallel(Comm& comm, int64_t seq, int64_t halo = 2);

// Positions (0 .. S-1) of the local rows of one sequence: local_seq() values.
void cp_local_positions(const ContextParallel& cp, int32_t* pos_S);

// This rank's rows of B full sequences: local_BS[b] = the two chunks of full_BS[b].
void cp_take_local(const ContextParallel& cp, const int32_t* full_BS, int32_t* local_BS, int64_t batch);

// Halo of the fused projection qkv_TP (B * local_seq rows of P floats).
// hist_2B2P [2B pieces][h][P] (h = cp.halo) receives, for piece n = 2b + p,
// the h rows before it (zeros for chunk 0). `send` and `recv` hold 2 * B * h * P
// floats each.
void cp_halo_forward(const ContextParallel& cp, const float* qkv_TP, int64_t batch, int64_t P, float* hist_2B2P,
                     float* send, float* recv);

// Sends each piece's history gradient dhist_2B2P back to the previous chunk's
// owner and adds the gradients it receives into its own last h rows of dqkv_TP.
void cp_halo_backward(const ContextParallel& cp, const float* dhist_2B2P, float* dqkv_TP, int64_t batch, int64_t P,
                      float* send, float* recv);

// All-gather of per-row vectors x_TK (B * local_seq rows of K floats) into
// full_BSK [B, S, K] in sequence order. begin() starts it (stage: B * S * K
// floats, untouched until end()); end() waits and reorders.
Request cp_gather_begin(const ContextParallel& cp, const float* x_TK, int64_t batch, int64_t K, float* stage);
void cp_gather_end(const ContextParallel& cp, Request& request, const float* stage, float* full_BSK, int64_t batch,
                   int64_t K);

// The backward of the gather: dx_TK (overwritten) = sum over the cp ranks of
// their dfull_BSK rows that this rank owns. stage: B * S * K floats.
void cp_reduce_scatter(const ContextParallel& cp, const float* dfull_BSK, float* dx_TK, int64_t batch, int64_t K,
                       float* stage);

}  // namespace zaya
