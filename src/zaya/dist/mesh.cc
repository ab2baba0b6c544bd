#include "zaya/dist/mesh.h"

#include "zaya/core/error.h"

namespace zaya {

void check_world_fits(int world, int ep, int cp, const std::string& source) {
  ZAYA_CHECK(ep >= 1 && cp >= 1, "parallel.ep = {} and parallel.cp = {} must be >= 1", ep, cp);
  if (world % (ep * cp) == 0) return;
  fail(
      "{}the world of {} rank{} does not fit parallel.ep = {} x parallel.cp = {}: the world size must be a multiple "
      "of ep * cp (dp = world / (ep * cp)){}",
      source.empty() ? "" : source + ": ", world, world == 1 ? "" : "s", ep, cp,
      world == 1 ? fmt::format(" (run under mpirun -np N, N a multiple of {})", ep * cp) : "");
}

ProcessMesh::ProcessMesh(std::unique_ptr<Comm> world, int ep, int cp) : world_(std::move(world)) {
  const int n = world_->size();
  check_world_fits(n, ep, cp);
  ep_size_ = ep;
  cp_size_ = cp;
  dp_size_ = n / (ep * cp);
  const int r = world_->rank();
  cp_ = world_->split(r / cp, r % cp, "cp");
  ep_ = world_->split(dp_rank() * cp + cp_rank(), ep_rank(), "ep");
  dp_ = world_->split(ep_rank(), dp_rank() * cp + cp_rank(), "dp");
}

void ProcessMesh::set_cp(int cp) {
  if (cp == cp_size_) return;
  const int n = world_->size();
  ZAYA_CHECK(ep_size_ == 1, "changing parallel.cp from {} to {} needs parallel.ep = 1 (it is {})", cp_size_, cp,
             ep_size_);
  ZAYA_CHECK(cp >= 1 && n % cp == 0, "the world of {} ranks does not fit cp = {}: the world size must be a multiple", n,
             cp);
  const double timeout = cp_->timeout();
  cp_size_ = cp;
  dp_size_ = n / cp;
  const int r = world_->rank();
  cp_ = world_->split(r / cp, r % cp, "cp");
  cp_->set_timeout(timeout);
}

}  // namespace zaya
