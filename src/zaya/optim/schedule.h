#pragma once
// Learning-rate schedules: linear warmup, then cosine decay or WSD
// (warmup-stable-decay: constant, then a linear decay over the last
// `decay_fraction` of the steps), or constant. All end at lr * min_lr_ratio.

#include <cstdint>
#include <string>

#include "zaya/core/enum_names.h"

namespace zaya {

// schedule.kind (core/enum_names.h: parsed where the config is read).
enum class ScheduleKind { kCosine, kWsd, kConstant };
inline constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {
    {ScheduleKind::kCosine, "cosine"}, {ScheduleKind::kWsd, "wsd"}, {ScheduleKind::kConstant, "constant"}};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kCosine;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;
  double decay_fraction = 0.2;  // wsd only
  void validate(const std::string& source) const;
};

// Multiplier of the peak learning rate at optimizer step `step` (0-based).
double lr_multiplier(const ScheduleConfig& s, int64_t step);

}  // namespace zaya
