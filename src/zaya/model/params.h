#pragma once
// The parameter table: the tensors of tensor_table.h laid out for one
// ZayaConfig: each with its legacy name (spec §6.1), shape, place in the
// parameter arena, how it is initialised and which optimizer treats it. The
// same offsets address the gradient arena and the optimizer-state arenas, so
// one table serves all.
//
// Layout: the dense region (everything every rank holds: embedding, attention,
// routers, norms, residual scales) comes first, then the expert region (the
// experts this rank holds, stacked per MoE layer). Under expert parallelism a
// rank's table lists only its own experts, keeping their global indices in
// the names, so the two regions are reduced over different process groups.
//
// Non-trainable buffers (the routers' balancing biases) live in their own table.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "zaya/dist/zero.h"
#include "zaya/model/config.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

struct ParamEntry {
  TensorRole role = TensorRole::kEmbedding;
  std::string name;            // legacy HF name, e.g. model.layers.3.zaya_block.router.down_proj.weight
  std::vector<int64_t> shape;  // PyTorch layout
  int64_t offset = 0;          // floats from the arena start
  int64_t numel = 0;
  ParamKind kind = ParamKind::kVector;
  InitKind init = InitKind::kZeros;
  float init_std = 0.0f;
  int half_layer = -1;  // 0..2*num_blocks-1, or -1 for global tensors
  int expert = -1;      // global expert index for per-expert tensors, else -1
  bool weight_decay = false;
  bool muon = false;  // orthogonalised update (2-D hidden matrices)
};

// The experts a rank holds: [first, first + count) of every MoE layer.
struct ExpertRange {
  int64_t first = 0;
  int64_t count = -1;  // -1: all experts
};

class ParamTable {
 public:
  // trainable = true: the parameter table; false: the buffer table (balancing biases).
  ParamTable(const ZayaConfig& config, bool trainable, ExpertRange experts = {});
  // A table of other tensors laid out by the caller (LoRA adapters, model/lora.h): one dense region.
  explicit ParamTable(std::vector<ParamEntry> entries);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  int64_t total_floats() const { return total_; }
  // Floats of the dense region [0, dense_floats()); the expert region follows.
  int64_t dense_floats() const { return dense_; }
  const ExpertRange& experts() const { return experts_; }
  const ParamEntry& at(const std::string& name) const;
  const ParamEntry* find(const std::string& name) const;

 private:
  void add(const ZayaConfig& config, TensorRole role, int half_layer, int expert = -1);
  std::vector<ParamEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
  int64_t dense_ = 0;
  ExpertRange experts_;
};

// The table as ZeRO-1 shards it (dist/zero.h): dense region then experts, and
// each tensor's gradient ready when the backward pass finishes its half-layer.
ZeroLayout zero_layout(const ParamTable& table);

// Writes the initial values of every entry (deterministic in `seed`, any thread count).
void init_params(const ParamTable& table, float* base, const ZayaConfig& config, uint64_t seed);
// The initial values of one entry into p[numel]: what init_params writes at its
// offset (a tensor's values depend only on its name and the seed).
void init_param(const ParamEntry& entry, float* p, const ZayaConfig& config, uint64_t seed);

// Parameter counts (spec §2 "sanity check"): total and active, with and without the embedding.
struct ParamCounts {
  int64_t total = 0;
  int64_t embedding = 0;
  int64_t active = 0;  // everything except the experts not chosen: top_k experts per MoE layer
  int64_t total_without_embedding() const { return total - embedding; }
  int64_t active_without_embedding() const { return active - embedding; }
};
ParamCounts count_parameters(const ZayaConfig& config);

}  // namespace zaya
