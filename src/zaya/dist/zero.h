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
// Two regions of the arena are sharded over two groups: the dense region
// (tensors every rank holds) over the world, the expert region (this rank's
// experts) over the dp group. The arena is described by a ZeroLayout, which
// the model's parameter table provides (model/params.h, zero_layout()); this
// layer knows nothing of the model.
//
// Overlap: gradients are reduced in buckets (one per half-layer, in the order
// the backward pass finishes them) with non-blocking reduce-scatters that run
// on the Comm layer's communication thread while earlier layers are still
// differentiated (docs/distributed.md, "How collectives run").

#include <cstdint>
#include <vector>

#include "zaya/dist/comm.h"
#include "zaya/dist/mesh.h"

namespace zaya {

// One tensor of the arena, as ZeRO-1 sees it.
struct ZeroTensor {
  int64_t offset = 0;  // floats from the arena start
  int64_t numel = 0;
  int ready_at = -1;  // the backward step whose layer_done(n) finishes its gradient (-1: only finish())
  // Its values are read only through a bf16 copy of the arena (the GEMM
  // weights under bf16 GEMMs): a bf16 all-gather may carry it.
  bool bf16_gather = false;
};

// The arena: tensors in offset order, packed; the first `dense_count` form the
// dense region, the rest the expert region.
struct ZeroLayout {
  std::vector<ZeroTensor> tensors;
  size_t dense_count = 0;
  int64_t total_floats = 0;
};

// Cuts the tensors [first, last) of `layout` (contiguous in the arena) into
// `parts` ranges at tensor boundaries, each as close as possible to an equal
// share of the floats. Returns parts + 1 arena offsets.
std::vector<int64_t> shard_boundaries(const ZeroLayout& layout, size_t first, size_t last, int parts);

// The tensors (indices into layout.tensors) a rank updates under ZeRO-1: its
// share of the dense region (split over the world) and of its expert region
// (split over its dp group). `layout` is that rank's (its experts). Used by
// GradientSync and by the offline checkpoint tools to write a checkpoint laid
// out for another mesh.
std::vector<size_t> zero_owned_entries(const ZeroLayout& layout, int world_rank, int world_size, int dp_rank,
                                       int dp_size);

class GradientSync {
 public:
  GradientSync(const ZeroLayout& layout, ProcessMesh& mesh, float* grads, float* params);

  // Indices of the owned tensors of the layout.
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
  // The same in bf16 (parallel.zero_gather_dtype = "bf16"): afterwards
  // `bf16_params` (a bf16 copy of the whole arena, same offsets) is, on every
  // rank, the rounding of what all_gather_parameters() would have replicated.
  // The tensors marked bf16_gather travel as bf16 and land only in the copy:
  // their float32 values stay exact on their owner (the master weights are
  // sharded) and stale elsewhere until the next all_gather_parameters() or
  // load. The other tensors travel as float32 into the arena, their copy is
  // their rounding.
  void all_gather_parameters_bf16(uint16_t* bf16_params);

  // Seconds spent waiting for gradient reductions after the backward pass
  // (communication that did not overlap compute), and in parameter gathering.
  double exposed_seconds() const { return exposed_seconds_; }
  // Seconds from the first bucket's launch to the last reduction's completion.
  double in_flight_seconds() const { return in_flight_seconds_; }
  double gather_seconds() const { return gather_seconds_; }
  // Bytes this rank received in its last parameter all-gather.
  int64_t gather_bytes() const { return gather_bytes_; }
  int64_t reduced_floats() const { return reduced_floats_; }

 private:
  // A run of consecutive tensors of one shard that travel in one dtype.
  struct Segment {
    int64_t offset = 0, numel = 0;
  };
  struct Region {
    Comm* group = nullptr;
    std::vector<int64_t> bounds;  // group size + 1 arena offsets
    std::vector<int64_t> counts;  // shard sizes, for all_gather_v
    std::vector<float> reduced;   // this rank's reduced shard (received here, then copied to the arena)
    // The bf16 gather: per rank, its shard's float32 and bf16 segments and
    // their sizes; the packed buffers every rank's segments are gathered into.
    std::vector<std::vector<Segment>> f32_segments, bf16_segments;
    std::vector<int64_t> f32_counts, bf16_counts;
    std::vector<float> f32_packed;
    std::vector<uint16_t> bf16_packed;
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

  float* grads_;
  float* params_;
  Region regions_[2];  // dense (world), experts (dp)
  std::vector<Bucket> buckets_;
  std::vector<Request> in_flight_;
  std::vector<size_t> owned_;
  double exposed_seconds_ = 0, gather_seconds_ = 0, in_flight_seconds_ = 0, first_launch_ = -1;
  int64_t reduced_floats_ = 0, gather_bytes_ = 0;
};

}  // namespace zaya
