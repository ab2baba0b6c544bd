#include "zaya/dist/zero.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/sum_squares.h"
#include "zaya/core/timer.h"

namespace zaya {

std::vector<int64_t> shard_boundaries(const ZeroLayout& layout, size_t first, size_t last, int parts) {
  const auto& e = layout.tensors;
  std::vector<int64_t> cuts;  // every tensor boundary, in order
  if (first == last) return std::vector<int64_t>(parts + 1, first < e.size() ? e[first].offset : layout.total_floats);
  for (size_t i = first; i < last; ++i) cuts.push_back(e[i].offset);
  cuts.push_back(e[last - 1].offset + e[last - 1].numel);
  const int64_t begin = cuts.front(), end = cuts.back();
  std::vector<int64_t> bounds(parts + 1);
  bounds[0] = begin;
  bounds[parts] = end;
  size_t c = 0;
  for (int k = 1; k < parts; ++k) {
    const double target = double(begin) + double(end - begin) * double(k) / double(parts);
    while (c + 1 < cuts.size() && double(cuts[c + 1]) <= target) ++c;
    // cuts[c] <= target < cuts[c + 1]: take the nearer, never going backwards.
    int64_t pick = cuts[c];
    if (c + 1 < cuts.size() && double(cuts[c + 1]) - target < target - double(cuts[c])) pick = cuts[c + 1];
    bounds[k] = std::max(pick, bounds[k - 1]);
  }
  return bounds;
}

std::vector<size_t> zero_owned_entries(const ZeroLayout& layout, int world_rank, int world_size, int dp_rank,
                                       int dp_size) {
  const auto& e = layout.tensors;
  const size_t n_dense = layout.dense_count;
  std::vector<size_t> owned;
  const std::vector<int64_t> dense = shard_boundaries(layout, 0, n_dense, world_size);
  const std::vector<int64_t> experts = shard_boundaries(layout, n_dense, e.size(), dp_size);
  for (size_t i = 0; i < e.size(); ++i) {
    const std::vector<int64_t>& b = i < n_dense ? dense : experts;
    const int part = i < n_dense ? world_rank : dp_rank;
    if (e[i].offset >= b[part] && e[i].offset < b[part + 1]) owned.push_back(i);
  }
  return owned;
}

GradientSync::GradientSync(const ZeroLayout& layout, ProcessMesh& mesh, float* grads, float* params)
    : grads_(grads), params_(params) {
  const auto& e = layout.tensors;
  const size_t n_dense = layout.dense_count;
  Comm* groups[2] = {&mesh.world(), &mesh.dp()};
  const size_t ranges[2][2] = {{0, n_dense}, {n_dense, e.size()}};
  for (int r = 0; r < 2; ++r) {
    Region& reg = regions_[r];
    reg.group = groups[r];
    reg.bounds = shard_boundaries(layout, ranges[r][0], ranges[r][1], reg.group->size());
    for (int q = 0; q < reg.group->size(); ++q) reg.counts.push_back(reg.bounds[q + 1] - reg.bounds[q]);
    reg.reduced.assign(size_t(reg.mine_end() - reg.mine_begin()), 0.0f);
    // The bf16 gather's segments: each shard's tensors in runs of one dtype.
    reg.f32_segments.resize(size_t(reg.group->size()));
    reg.bf16_segments.resize(size_t(reg.group->size()));
    reg.f32_counts.assign(size_t(reg.group->size()), 0);
    reg.bf16_counts.assign(size_t(reg.group->size()), 0);
    for (size_t i = ranges[r][0]; i < ranges[r][1]; ++i) {
      const size_t q =
          size_t(std::upper_bound(reg.bounds.begin(), reg.bounds.end(), e[i].offset) - reg.bounds.begin()) - 1;
      if (e[i].numel == 0 || q >= size_t(reg.group->size())) continue;
      std::vector<Segment>& segs = e[i].bf16_gather ? reg.bf16_segments[q] : reg.f32_segments[q];
      if (!segs.empty() && segs.back().offset + segs.back().numel == e[i].offset)
        segs.back().numel += e[i].numel;
      else
        segs.push_back({e[i].offset, e[i].numel});
      (e[i].bf16_gather ? reg.bf16_counts : reg.f32_counts)[q] += e[i].numel;
    }
    int64_t f32_total = 0, bf16_total = 0;
    for (int q = 0; q < reg.group->size(); ++q) {
      f32_total += reg.f32_counts[size_t(q)];
      bf16_total += reg.bf16_counts[size_t(q)];
    }
    reg.f32_packed.resize(size_t(f32_total));
    reg.bf16_packed.resize(size_t(bf16_total));
    // Buckets: runs of consecutive entries finished by the same half-layer.
    for (size_t i = ranges[r][0]; i < ranges[r][1]; ++i) {
      if (buckets_.empty() || buckets_.back().region != r || buckets_.back().ready_at != e[i].ready_at) {
        Bucket b;
        b.region = r;
        b.begin = e[i].offset;
        b.ready_at = e[i].ready_at;
        buckets_.push_back(b);
      }
      buckets_.back().end = e[i].offset + e[i].numel;
    }
  }
  owned_ = zero_owned_entries(layout, mesh.rank(), mesh.world_size(), mesh.dp().rank(), mesh.dp().size());
  for (Bucket& b : buckets_) {
    const Region& reg = regions_[b.region];
    for (int q = 0; q < reg.group->size(); ++q)
      b.counts.push_back(std::max<int64_t>(0, std::min(b.end, reg.bounds[q + 1]) - std::max(b.begin, reg.bounds[q])));
  }
  in_flight_.reserve(buckets_.size());
}

void GradientSync::begin() {
  for (Bucket& b : buckets_) b.launched = false;
  in_flight_.clear();
  exposed_seconds_ = 0;
  first_launch_ = -1;
  reduced_floats_ = 0;
}

void GradientSync::launch(Bucket& b) {
  Region& reg = regions_[b.region];
  const int64_t mine = reg.mine_begin();
  float* recv = reg.reduced.data() + std::clamp(b.begin - mine, int64_t(0), reg.mine_end() - mine);
  if (first_launch_ < 0) first_launch_ = now_seconds();
  in_flight_.push_back(
      reg.group->ireduce_scatter_v(grads_ + b.begin, recv, b.counts.data(), DType::kF32, ReduceOp::kSum));
  b.launched = true;
  reduced_floats_ += b.end - b.begin;
}

void GradientSync::progress() {
  // Releases the buckets that are done (the communication thread runs them;
  // any of this process's communicators can test any of its requests).
  for (Request& r : in_flight_)
    if (r) regions_[0].group->test(r);
}

void GradientSync::layer_done(int n) {
  for (Bucket& b : buckets_)
    if (!b.launched && b.ready_at == n) launch(b);
  progress();
}

void GradientSync::finish() {
  ZAYA_PROFILE_SCOPE("dist.grad_reduce_wait");
  const double t0 = now_seconds();
  for (Bucket& b : buckets_)
    if (!b.launched) launch(b);
  for (Request& r : in_flight_)
    if (r) regions_[0].group->wait(r);
  for (Region& reg : regions_)
    if (!reg.reduced.empty())
      std::memcpy(grads_ + reg.mine_begin(), reg.reduced.data(), sizeof(float) * reg.reduced.size());
  exposed_seconds_ = now_seconds() - t0;
  in_flight_seconds_ = first_launch_ < 0 ? 0.0 : now_seconds() - first_launch_;
}

double GradientSync::owned_sum_squares() const {
  double total = 0;
  for (const Region& reg : regions_) {
    total += sum_squares(grads_ + reg.mine_begin(), reg.mine_end() - reg.mine_begin());
  }
  return total;
}

void GradientSync::all_gather_parameters() {
  ZAYA_PROFILE_SCOPE("dist.param_all_gather");
  const double t0 = now_seconds();
  gather_bytes_ = 0;
  for (Region& reg : regions_) {
    reg.group->all_gather_v(params_ + reg.mine_begin(), params_ + reg.bounds[0], reg.counts.data(), DType::kF32);
    gather_bytes_ += int64_t(sizeof(float)) * (reg.bounds.back() - reg.bounds.front() - reg.counts[reg.group->rank()]);
  }
  gather_seconds_ = now_seconds() - t0;
}

void GradientSync::all_gather_parameters_bf16(uint16_t* bf16_params) {
  ZAYA_PROFILE_SCOPE("dist.param_all_gather");
  const double t0 = now_seconds();
  gather_bytes_ = 0;
  for (Region& reg : regions_) {
    const int me = reg.group->rank(), n = reg.group->size();
    int64_t f32_total = 0, bf16_total = 0, f32_mine = 0, bf16_mine = 0;
    for (int q = 0; q < n; ++q) {
      if (q == me) f32_mine = f32_total, bf16_mine = bf16_total;
      f32_total += reg.f32_counts[size_t(q)];
      bf16_total += reg.bf16_counts[size_t(q)];
    }
    if (f32_total + bf16_total == 0) continue;
    // This rank's shard into its place in the packed buffers (in place, as all_gather_parameters()).
    float* f = reg.f32_packed.data() + f32_mine;
    for (const Segment& s : reg.f32_segments[size_t(me)]) {
      std::memcpy(f, params_ + s.offset, sizeof(float) * size_t(s.numel));
      f += s.numel;
    }
    uint16_t* h = reg.bf16_packed.data() + bf16_mine;
    for (const Segment& s : reg.bf16_segments[size_t(me)]) {
      const float* src = params_ + s.offset;
#pragma omp parallel for schedule(static) if (s.numel > 65536)
      for (int64_t i = 0; i < s.numel; ++i) h[i] = float_to_bf16(src[i]);
      h += s.numel;
    }
    if (f32_total > 0)
      reg.group->all_gather_v(reg.f32_packed.data() + f32_mine, reg.f32_packed.data(), reg.f32_counts.data(),
                              DType::kF32);
    if (bf16_total > 0)
      reg.group->all_gather_v(reg.bf16_packed.data() + bf16_mine, reg.bf16_packed.data(), reg.bf16_counts.data(),
                              DType::kBF16);
    // Every rank's segments to their arena offsets: float32 ones into the arena and their rounding into the copy.
    const float* fp = reg.f32_packed.data();
    const uint16_t* hp = reg.bf16_packed.data();
    for (int q = 0; q < n; ++q) {
      for (const Segment& s : reg.f32_segments[size_t(q)]) {
        std::memcpy(params_ + s.offset, fp, sizeof(float) * size_t(s.numel));
        for (int64_t i = 0; i < s.numel; ++i) bf16_params[s.offset + i] = float_to_bf16(fp[i]);
        fp += s.numel;
      }
      for (const Segment& s : reg.bf16_segments[size_t(q)]) {
        std::memcpy(bf16_params + s.offset, hp, sizeof(uint16_t) * size_t(s.numel));
        hp += s.numel;
      }
    }
    gather_bytes_ += int64_t(sizeof(float)) * (f32_total - reg.f32_counts[size_t(me)]) +
                     int64_t(sizeof(uint16_t)) * (bf16_total - reg.bf16_counts[size_t(me)]);
  }
  gather_seconds_ = now_seconds() - t0;
}

}  // namespace zaya
