#pragma once
// `zaya size`: ZAYA1-style configs proposed for a parameter or compute target
// on a hardware profile, or (check) the inefficient dimensions of one config;
// and the proposals saved as Hugging Face config.json files.

#include <string>
#include <vector>

#include "zaya/plan/plan_options.h"
#include "zaya/plan/sizing_rules.h"

namespace zaya {

struct SizeJobOptions {
  PlanCommonOptions common;
  std::string check;                          // a config to check (replaces common.model); empty: propose
  double total = 0, active = 0, compute = 0;  // the target when proposing: exactly one
  int count = 3;                              // proposals
};

struct SizeJobResult {
  PlanSetup setup;
  std::vector<SizingFinding> findings;  // check
  std::vector<SizeProposal> proposals;  // propose, best predicted MFU first
};

SizeJobResult run_size_job(const SizeJobOptions& options);

// Creates `dir` (and its parents) for save_size_proposal.
void create_size_proposal_dir(const std::string& dir);
// Writes proposal `index` (from 1) as DIR/proposalINDEX.json with HF
// config.json keys; returns the path.
std::string save_size_proposal(const std::string& dir, int index, const ZayaConfig& config);

}  // namespace zaya
