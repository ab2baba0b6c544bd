#pragma once
// The process mesh dp x ep x cp. World rank r = (dp_rank * ep + ep_rank) * cp + cp_rank:
// the cp ranks of one sequence are consecutive, then the ep ranks of one
// replica (on one node when ranks are placed node by node, where the per-layer
// all-gathers and all-to-all exchanges are cheapest).
//
//   world  every rank: dense parameters (attention, routers, norms, embedding)
//          are replicated on all of them and their gradients reduced over all
//   cp     the ranks that share the same sequences, each holding a part of
//          every sequence (context parallelism, model/context_parallel.h)
//   ep     the ranks that together hold all experts of one replica: tokens are
//          dispatched among them with all-to-all-v
//   dp     every rank holding the same experts (same ep_rank, dp x cp of them):
//          expert gradients are reduced over them
//
// Data: the world / cp groups of cp ranks each read their own sequences
// (data_rank() of data_ranks()).

#include <memory>
#include <string>

#include "zaya/dist/comm.h"

namespace zaya {

// Fails unless `world` ranks make a dp x ep x cp mesh (a multiple of ep * cp),
// the message prefixed with `source` (the config) when it is not empty; a
// single process is told to run under mpirun.
void check_world_fits(int world, int ep, int cp, const std::string& source = "");

class ProcessMesh {
 public:
  // Splits `world` into the dp, ep and cp groups; fails (on every rank alike)
  // if the world size is not a multiple of ep * cp.
  ProcessMesh(std::unique_ptr<Comm> world, int ep, int cp = 1);

  // Collective: re-cuts the cp groups (a recipe phase with another cp). Only
  // with ep = 1, where the ep groups are single ranks whatever cp is and the
  // dp group is the world, so no other group (and no parameter) moves. The
  // old cp communicator is released: callers must not hold it.
  void set_cp(int cp);

  Comm& world() { return *world_; }
  Comm& dp() { return *dp_; }
  Comm& ep() { return *ep_; }
  Comm& cp() { return *cp_; }
  int world_size() const { return world_->size(); }
  int rank() const { return world_->rank(); }
  // Data-parallel replicas (world / (ep * cp)) and this rank's replica.
  int dp_size() const { return dp_size_; }
  int dp_rank() const { return rank() / (ep_size_ * cp_size_); }
  int ep_size() const { return ep_size_; }
  int ep_rank() const { return (rank() / cp_size_) % ep_size_; }
  int cp_size() const { return cp_size_; }
  int cp_rank() const { return rank() % cp_size_; }
  // Groups reading distinct sequences: world / cp of them.
  int data_ranks() const { return world_size() / cp_size_; }
  int data_rank() const { return rank() / cp_size_; }

 private:
  std::unique_ptr<Comm> world_, dp_, ep_, cp_;
  int dp_size_ = 1, ep_size_ = 1, cp_size_ = 1;
};

}  // namespace zaya
