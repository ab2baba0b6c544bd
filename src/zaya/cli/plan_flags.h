#pragma once
// The flags `zaya plan` and `zaya size` share (plan/plan_options.h).

#include <CLI/CLI.hpp>

#include "zaya/plan/plan_options.h"

namespace zaya::cli {

void add_plan_common_options(CLI::App& cmd, PlanCommonOptions& o);

}  // namespace zaya::cli
