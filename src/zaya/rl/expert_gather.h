#pragma once
// The rollout decoder under expert parallelism (docs/rl.md "Several ranks"):
// the trainer holds its ep shard of the experts (train/step_numerics.h), the
// cached decoder (infer/infer_model.h) needs every expert on its rank. Before
// each rollout (and held-out scoring) every rank gathers the full expert set
// over its ep group into a copy of the whole model, in the trainer's storage,
// which the decoder then reads as on one rank: the dense tensors and buffers
// are copied (every rank holds them alike), each rank's experts all-gathered.
// So the rollouts stay rank-local (no collective per token, ranks finish
// their samples independently) and the samples are those of the one-rank run
// over the same weights.
//
// Memory: the copy holds every parameter of the model, as one rank without
// expert parallelism holds it (float32, or bf16 for a frozen bf16 LoRA base),
// for the whole run, plus, during the gather, the float32 values of every
// expert (ep x this rank's share) in a temporary buffer. A QLoRA base
// (lora.base_dtype, packed experts) is not gathered (refused by the config).

#include <memory>

#include "zaya/dist/comm.h"
#include "zaya/model/model.h"

namespace zaya {

// A model of local's config holding every expert, in local's storage (its values set by gather_experts).
std::unique_ptr<ZayaModel> full_model_like(const ZayaModel& local);

// Collective over `ep` (local's ep group; rank r holds experts [r * E/ep, (r + 1) * E/ep), train/step_numerics.h):
// full = local's dense tensors and buffers, and every rank's experts. Bitwise copies.
void gather_experts(const ZayaModel& local, Comm& ep, ZayaModel& full);

}  // namespace zaya
