#pragma once
// What `zaya plan` and `zaya size` share: the profile, the model, extra GEMM
// tables and the training layout, resolved and validated in one place.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zaya/model/config.h"
#include "zaya/plan/gemm_model.h"
#include "zaya/plan/hardware_profile.h"
#include "zaya/plan/step_model.h"

namespace zaya {

struct PlanCommonOptions {
  std::string profile = "mi300x-pollara";  // built-in name or profile JSON
  std::string model = "zaya1-base";        // preset, config.json or model directory
  std::vector<std::string> gemm_tables;    // `zaya bench gemm --json` files
                                           // searched before the profile's table
  int64_t world = 1, ep = 1, cp = 1;
  int64_t micro_batch = 0, seq_len = 0;  // 0: 1 x 4096 on GPUs, 8 x 256 on CPUs
                                         // (zaya bench train's default)
  int64_t grad_accum = 0;                // 0: from --global-batch, else 1
  int64_t global_batch = 0;              // sequences per step (all devices)
  std::string dtype,
      ns_dtype = "bf16";  // dtype default: bf16 on GPUs, f32 on CPUs (zaya train)
  bool muon = true;
  int ns_steps = 5;
  double skip_fraction = 0;
  std::string overlap = "auto";    // auto | on | off
  std::string grad_dtype;          // gradients reduced in: f32 or bf16 (default: the GEMM dtype)
  std::string recompute = "none";  // train.recompute: none, attention, moe, full
  int64_t loss_chunk = 0;          // train.loss_chunk: rows of logits at a time (0: all)
};

struct PlanSetup {
  HardwareProfile profile;
  ZayaConfig config;
  TrainLayout layout;
  std::optional<GemmModel> gemm;
};

PlanSetup setup_plan(const PlanCommonOptions& options);

}  // namespace zaya
