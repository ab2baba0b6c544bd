#pragma once
// Selective activation recomputation (train.recompute, docs/training.md
// "Activation recomputation"): which blocks' activations the forward pass
// keeps for backward and which the backward pass recomputes, trading forward
// FLOPs for memory as Megatron does.
//
//   none       every half-layer keeps its activations
//   attention  attention blocks keep only their normed input; the backward
//              reruns each one's forward just before its backward
//   moe        the same for the MoE blocks (router and experts)
//   full       every half-layer keeps only its input (the residual stream);
//              the backward reruns its norm and block
//
// The recomputed activations live in one set of buffers reused layer after
// layer (model/model.h), so the workspace shrinks by all but one layer's.

#include <string>
#include <vector>

#include "zaya/core/enum_names.h"

namespace zaya {

enum class Recompute { kNone, kAttention, kMoe, kFull };
// The names of train.recompute (core/enum_names.h): the training config holds the enum, parsed where it is read.
inline constexpr EnumName<Recompute> kRecomputeNames[] = {{Recompute::kNone, "none"},
                                                          {Recompute::kAttention, "attention"},
                                                          {Recompute::kMoe, "moe"},
                                                          {Recompute::kFull, "full"}};

// The names of kRecomputeNames as strings, in the order of the enum.
const std::vector<std::string>& recompute_names();
const std::string& recompute_name(Recompute r);
// Throws naming `what` (a file and key, a flag) and the allowed names.
Recompute parse_recompute(const std::string& name, const std::string& what);

inline bool recomputes_attention(Recompute r) { return r == Recompute::kAttention || r == Recompute::kFull; }
inline bool recomputes_moe(Recompute r) { return r == Recompute::kMoe || r == Recompute::kFull; }

}  // namespace zaya
