#include "zaya/dist/mesh.h"

#include "zaya/core/error.h"

namespace zaya {

ProcessMesh::ProcessMesh(std::unique_ptr<Comm> world, int ep) : world_(std::move(world)) {
  const int n = world_->size();
  ZAYA_CHECK(ep >= 1 && n % ep == 0,
             "the world of {} ranks does not fit parallel.ep = {}: the world size must be a multiple of ep "
             "(dp = world / ep)",
             n, ep);
  ep_size_ = ep;
  dp_size_ = n / ep;
  const int r = world_->rank();
  ep_ = world_->split(r / ep, r % ep, "ep");
  dp_ = world_->split(r % ep, r / ep, "dp");
}

}  // namespace zaya
