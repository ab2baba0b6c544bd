#pragma once
// Hardware-aware sizing rules (docs/systems-notes.md §2, docs/prior-art.md
// §5): `zaya size --check` flags a config's inefficient dimensions with
// the predicted slowdown, and `zaya size` proposes ZAYA1-style configs for a
// target. The rules, each judged on the profile's GEMM model:
//
//   head_dim      a multiple of 64 (128 preferred)
//   hidden, q/kv latent widths, expert_ffn, router_hidden, vocab
//                 multiples of the profile's align (tile / vector width);
//                 a dimension that is not costs the time of its padded GEMMs
//   expert rows   tokens per expert GEMM (T k / E) at least one tile, else
//                 the expert GEMMs run below the fast regime
//
// The slowdown of a dimension is the predicted time per FLOP of every GEMM of
// one training micro-batch as configured, against the same with that
// dimension rounded up to the multiple.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/model/config.h"
#include "zaya/plan/gemm_model.h"
#include "zaya/plan/step_model.h"

namespace zaya {

struct SizingFinding {
  std::string field;  // config key, e.g. "expert_ffn"
  int64_t value = 0;
  int64_t suggested = 0;
  std::string rule;
  double slowdown = 0;  // predicted extra time per FLOP of the micro-batch's
                        // GEMMs (0.12 = 12% slower)
  std::string basis;    // "measured" / "model"
};

std::vector<SizingFinding> check_config(const ZayaConfig& c, const TrainLayout& layout, const GemmModel& gemm);

// What `zaya size` is asked for.
struct SizeTarget {
  double total_params = 0;  // one of these three
  double active_params = 0;
  double compute_flops = 0;  // training budget: active params from 6 N D with D
                             // = 20 N (compute-optimal)
};

struct SizeProposal {
  ZayaConfig config;
  int64_t total_params = 0, active_params = 0;
  StepPrediction step;
  std::vector<std::string> reasons;  // one line per choice, with the numbers behind it
};

// Up to `count` proposals, best predicted throughput per active parameter
// first.
std::vector<SizeProposal> propose_configs(const SizeTarget& target, const TrainLayout& layout, const GemmModel& gemm,
                                          int count = 3);

}  // namespace zaya
