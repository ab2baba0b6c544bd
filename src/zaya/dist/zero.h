#pragma once
// ZeRO-1 (Rajbhandari et al. 2020): gradients are reduce-scattered and each
// rank keeps the optimizer state of, and updates, only its shard of the
// parameters; the updated shards are then all-gathered.
//
// Shards are contiguous ranges of the parameter arena cut at tensor
// boundaries (balanced by size; any rank count, uneven shards). Whole
// matrices therefore live on one rank, which is what Muon needs: the owner
// has the full reduced gradient of each of its matrices and runs Newton-Schulz
// on it ("distributed Muon": matrices assigned to ranks, results gathered).
//
// Two regions of the arena are sharded over two groups (model/params.h):
// the dense region over the world, the expert region over the dp group.
//
// Overlap: gradients are reduced in buckets (one per half-layer, in the order
// the backward pass finishes them) with non-blocking reduce-scatters that run
// while earlier layers are still differentiated; progress is driven by testing
// the requests after each layer.

#include <cstdint>
#include <vector>

#include "zaya/dist/comm.h"
#include "zaya/dist/mesh.h"
#include "zaya/model/params.h"

namespace zaya {

// Cuts the entries [first, last) of `table` (contiguous in the arena) into
// `parts` ranges at entry boundaries, each as close as possible to an equal
// share of the floats. Returns parts + 1 arena offsets.
std::vector<int64_t> shard_boundaries(const ParamTable& table, size_t first, size_t last, int parts);

// The entries a rank updates under ZeRO-1: its share of the dense region
// (split over the world) and of its expert region (split over its dp group).
// `table` is that rank's table (its experts). Used by GradientSync and by the
// offline checkpoint tools to write a checkpoint laid out for another mesh.
std::vector<size_t> zero_owned_entries(const ParamTable& table, int world_rank, int world_size, int dp_rank,
                                       int dp_size);

class GradientSync {
 public:
  GradientSync(const ParamTable& table, ProcessMesh& mesh, float* grads, float* params);

  // True when this rank updates `entry` (it lies in this rank's shard).
  bool owns(const ParamEntry& entry) const;
  // Indices of the owned entries of the table.
  const std::vector<size_t>& owned_entries() const { return owned_; }

  // Call before the last micro-batch's backward pass.
  void begin();
  // The gradients of half-layer `n` (its dense tensors and its experts) are final.
  void layer_done(int n);
  // Reduces whatever is left, waits for everything, and stores the reduced
  // gradient shards in the gradient arena at their own offsets.
  void finish();
  // Sum of squares of this rank's reduced gradient shards (the global norm is
  // the square root of the world sum of these).
  double owned_sum_squares() const;
  // Replicates the updated shards: parameters of every rank are equal again.
  void all_gather_parameters();

  // Seconds spent waiting for gradient reductions after the backward pass
  // (communication that did not overlap compute), and in parameter gathering.
  double exposed_seconds() const { return exposed_seconds_; }
  // Seconds from the first bucket's launch to the last reduction's completion.
  double in_flight_seconds() const { return in_flight_seconds_; }
  double gather_seconds() const { return gather_seconds_; }
  int64_t reduced_floats() const { return reduced_floats_; }

 private:
  struct Region {
    Comm* group = nullptr;
    std::vector<int64_t> bounds;  // group size + 1 arena offsets
    std::vector<int64_t> counts;  // shard sizes, for all_gather_v
    std::vector<float> reduced;   // this rank's reduced shard (received here, then copied to the arena)
    int64_t mine_begin() const { return bounds[group->rank()]; }
    int64_t mine_end() const { return bounds[group->rank() + 1]; }
  };
  struct Bucket {
    int region = 0;
    int64_t begin = 0, end = 0;   // arena range
    int ready_at = -1;            // half-layer whose completion releases it (-1: at finish)
    std::vector<int64_t> counts;  // per-rank share of the range
    bool launched = false;
  };
  void launch(Bucket& b);
  void progress();

  const ParamTable& table_;
  float* grads_;
  float* params_;
  Region regions_[2];  // dense (world), experts (dp)
  std::vector<Bucket> buckets_;
  std::vector<Request> in_flight_;
  std::vector<size_t> owned_;
  double exposed_seconds_ = 0, gather_seconds_ = 0, in_flight_seconds_ = 0, first_launch_ = -1;
  int64_t reduced_floats_ = 0;
};

}  // namespace zaya
