#pragma once
// The tensors of a training checkpoint, in one place (docs/checkpoints.md):
// which tensors a rank writes and reads, under which names, in which dtype.
// The live save and the resume (train_state.h) and the offline tools
// (reshape, import: checkpoint_tools.h) all take their tensor lists from here.
//
//   <legacy parameter name>   f32   the parameters (ZeRO-1: each by its owner)
//   optim.m.<name>            f32   first moment (Muon: the momentum)
//   optim.v.<name>            f32   second moment (AdamW parameters only)
//   <legacy buffer name>      f32   balancing biases (replicated: rank 0 writes)
//   balance.m, balance.v      f64   the balancing controller's moments [blocks, slots] (rank 0)

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zaya/ckpt/format.h"
#include "zaya/model/lora.h"
#include "zaya/model/params.h"

namespace zaya {

// kLoraParameter: an adapter of a LoRA run (model/lora.h); in such a run the
// moments are the adapters' (entry: in the adapter table).
enum class StateTensorKind {
  kParameter,
  kFirstMoment,
  kSecondMoment,
  kBuffer,
  kBalanceFirst,
  kBalanceSecond,
  kLoraParameter
};

struct StateTensor {
  StateTensorKind kind = StateTensorKind::kParameter;
  size_t entry = 0;  // index in the parameter table (moments: their parameter's) or the buffer table
  std::string name;
  CkptDType dtype = CkptDType::kF32;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

// kWrite: what a rank writes: its owned parameters (and their moments), and
// on rank 0 the replicated state. kRead: what a rank needs to continue: every
// parameter of its table, every buffer, the moments of its owned parameters
// and the controller's.
enum class StateUse { kWrite, kRead };

// `table`/`buffers`: the rank's parameter table (its experts) and buffer
// table; `owned`: its ZeRO-1 entries (dist/zero.h); muon: Muon matrices have
// no second moment; with_optimizer: false for weights-only checkpoints.
std::vector<StateTensor> state_tensors(const ZayaConfig& config, const ParamTable& table, const ParamTable& buffers,
                                       const std::vector<size_t>& owned, bool muon, bool root, bool with_optimizer,
                                       StateUse use);

// The state of a LoRA run (docs/training.md "LoRA"): the adapters under
// PEFT's names and their AdamW moments (replicated on every rank: rank 0
// writes), the balancing biases and the controller's moments. The frozen base
// weights are not saved: a resume rebuilds them as the run started
// (model.init_from, or the seed).
std::vector<StateTensor> lora_state_tensors(const ZayaConfig& config, const ParamTable& adapters,
                                            const ParamTable& buffers, bool root, bool with_optimizer, StateUse use);

// True for the optimizer's and the controller's tensors (optim.*, balance.*).
bool is_optimizer_state_tensor(const std::string& name);

// What every rank of a dp x ep mesh writes (offline reshape and import).
std::vector<std::vector<StateTensor>> mesh_state_tensors(const ZayaConfig& config, int dp, int ep, bool muon,
                                                         bool with_optimizer);
// The same for a LoRA run of these adapters (every rank holds all of them, the
// experts' included: rank 0 writes everything, whatever the layout).
std::vector<std::vector<StateTensor>> lora_mesh_state_tensors(const ZayaConfig& config, const LoraConfig& lora, int dp,
                                                              int ep, bool with_optimizer);

}  // namespace zaya
