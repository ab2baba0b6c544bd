#include "zaya/train/state_tensors.h"

#include "zaya/core/error.h"

namespace zaya {

int64_t StateTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool is_optimizer_state_tensor(const std::string& name) {
  return name.rfind("optim.", 0) == 0 || name.rfind("balance.", 0) == 0;
}

std::vector<StateTensor> state_tensors(const ZayaConfig& c, const ParamTable& table, const ParamTable& buffers,
                                       const std::vector<size_t>& owned, bool muon, bool root, bool with_optimizer,
                                       StateUse use) {
  using K = StateTensorKind;
  std::vector<StateTensor> out;
  const auto& entries = table.entries();
  if (use == StateUse::kRead)
    for (size_t i = 0; i < entries.size(); ++i)
      out.push_back({K::kParameter, i, entries[i].name, CkptDType::kF32, entries[i].shape});
  for (size_t i : owned) {
    const ParamEntry& e = entries[i];
    if (use == StateUse::kWrite) out.push_back({K::kParameter, i, e.name, CkptDType::kF32, e.shape});
    if (!with_optimizer) continue;
    out.push_back({K::kFirstMoment, i, "optim.m." + e.name, CkptDType::kF32, e.shape});
    if (!(muon && e.muon)) out.push_back({K::kSecondMoment, i, "optim.v." + e.name, CkptDType::kF32, e.shape});
  }
  if (use == StateUse::kWrite && !root) return out;  // the replicated state is written once
  for (size_t i = 0; i < buffers.entries().size(); ++i)
    out.push_back({K::kBuffer, i, buffers.entries()[i].name, CkptDType::kF32, buffers.entries()[i].shape});
  if (with_optimizer) {
    const std::vector<int64_t> shape = {c.num_blocks, c.router_slots()};
    out.push_back({K::kBalanceFirst, 0, "balance.m", CkptDType::kF64, shape});
    out.push_back({K::kBalanceSecond, 0, "balance.v", CkptDType::kF64, shape});
  }
  return out;
}

std::vector<StateTensor> lora_state_tensors(const ZayaConfig& c, const ParamTable& adapters, const ParamTable& buffers,
                                            bool root, bool with_optimizer, StateUse use) {
  using K = StateTensorKind;
  std::vector<StateTensor> out;
  if (use == StateUse::kWrite && !root) return out;  // everything is replicated: written once
  const auto& entries = adapters.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const ParamEntry& e = entries[i];
    out.push_back({K::kLoraParameter, i, e.name, CkptDType::kF32, e.shape});
    if (!with_optimizer) continue;
    out.push_back({K::kFirstMoment, i, "optim.m." + e.name, CkptDType::kF32, e.shape});
    out.push_back({K::kSecondMoment, i, "optim.v." + e.name, CkptDType::kF32, e.shape});
  }
  for (size_t i = 0; i < buffers.entries().size(); ++i)
    out.push_back({K::kBuffer, i, buffers.entries()[i].name, CkptDType::kF32, buffers.entries()[i].shape});
  if (with_optimizer) {
    const std::vector<int64_t> shape = {c.num_blocks, c.router_slots()};
    out.push_back({K::kBalanceFirst, 0, "balance.m", CkptDType::kF64, shape});
    out.push_back({K::kBalanceSecond, 0, "balance.v", CkptDType::kF64, shape});
  }
  return out;
}

std::vector<std::vector<StateTensor>> mesh_state_tensors(const ZayaConfig& c, int dp, int ep, bool muon,
                                                         bool with_optimizer) {
  ZAYA_CHECK(dp >= 1 && ep >= 1 && c.experts % ep == 0, "layout dp {} x ep {} does not fit {} experts", dp, ep,
             c.experts);
  const int world = dp * ep, local = int(c.experts) / ep;
  const ParamTable buffers(c, false);
  std::vector<std::vector<StateTensor>> out(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const ParamTable table(c, true, ExpertRange{(r % ep) * local, local});
    const std::vector<size_t> owned = zero_owned_entries(zero_layout(table), r, world, r / ep, dp);
    out[size_t(r)] = state_tensors(c, table, buffers, owned, muon, r == 0, with_optimizer, StateUse::kWrite);
  }
  return out;
}

std::vector<std::vector<StateTensor>> lora_mesh_state_tensors(const ZayaConfig& c, const LoraConfig& lora, int dp,
                                                              int ep, bool with_optimizer) {
  ZAYA_CHECK(dp >= 1 && ep >= 1 && c.experts % ep == 0, "layout dp {} x ep {} does not fit {} experts", dp, ep,
             c.experts);
  const ParamTable adapters = lora_adapter_table(c, lora);
  const ParamTable buffers(c, false);
  std::vector<std::vector<StateTensor>> out(size_t(dp * ep));
  for (int r = 0; r < dp * ep; ++r)
    out[size_t(r)] = lora_state_tensors(c, adapters, buffers, r == 0, with_optimizer, StateUse::kWrite);
  return out;
}

}  // namespace zaya
