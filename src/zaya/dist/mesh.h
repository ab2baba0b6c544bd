#pragma once
// The process mesh dp x ep. World rank r = dp_rank * ep + ep_rank: the ep
// ranks of one data-parallel replica are consecutive (on one node when ranks
// are placed node by node, where all-to-all traffic is cheapest).
//
//   world  every rank: dense parameters (attention, routers, norms, embedding)
//          are replicated on all of them and their gradients reduced over all
//   ep     the ranks that together hold all experts of one replica: tokens are
//          dispatched among them with all-to-all-v
//   dp     the ranks holding the same experts (same ep_rank): expert gradients
//          are reduced over them

#include <memory>

#include "zaya/dist/comm.h"

namespace zaya {

class ProcessMesh {
 public:
  // Splits `world` into the dp and ep groups; fails (on every rank alike) if
  // the world size is not a multiple of ep.
  ProcessMesh(std::unique_ptr<Comm> world, int ep);

  Comm& world() { return *world_; }
  Comm& dp() { return *dp_; }
  Comm& ep() { return *ep_; }
  int world_size() const { return world_->size(); }
  int rank() const { return world_->rank(); }
  int dp_size() const { return dp_size_; }
  int ep_size() const { return ep_size_; }
  int dp_rank() const { return rank() / ep_size_; }
  int ep_rank() const { return rank() % ep_size_; }

 private:
  std::unique_ptr<Comm> world_, dp_, ep_;
  int dp_size_ = 1, ep_size_ = 1;
};

}  // namespace zaya
