// zaya size: propose ZAYA1-style configs for a parameter or compute target on
// a hardware profile, or (--check CONFIG) flag a config's inefficient
// dimensions with the predicted slowdown (src/zaya/plan/size_job.h, sizing_rules.h).
#include <fmt/format.h>

#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/cli/plan_flags.h"
#include "zaya/plan/size_job.h"

namespace zaya::cli {
namespace {

// The job's options (plan/size_job.h) and where to save the proposals.
struct SizeCliOptions : SizeJobOptions {
  std::string save_dir;
};

void run_size(const SizeCliOptions& o) {
  const SizeJobResult res = run_size_job(o);
  const PlanSetup& s = res.setup;
  const HardwareProfile& p = s.profile;
  if (!o.check.empty()) {
    fmt::print(
        "zaya size --check {} on {} (align {}, tile {}x{}, {} compute "
        "units), micro-batch {} x seq {}:\n",
        o.check, p.name, p.align, p.tile_m, p.tile_n, p.compute_units, s.layout.micro_batch, s.layout.seq_len);
    if (res.findings.empty()) {
      fmt::print("  every dimension follows the rules: nothing to flag\n");
      return;
    }
    for (const SizingFinding& f : res.findings)
      fmt::print(
          "  {} = {}: should be {} -> {}; predicted slowdown of the "
          "micro-batch's GEMMs per FLOP: {:+.1f}% "
          "({})\n",
          f.field, f.value, f.rule, f.suggested, 100 * f.slowdown, f.basis);
    return;
  }
  const std::vector<SizeProposal>& props = res.proposals;
  fmt::print(
      "zaya size on {}: {} proposals, best predicted MFU first (layout: "
      "{} device(s), ep {}, micro-batch {} x "
      "seq {}, {})\n",
      p.name, props.size(), s.layout.world, s.layout.ep, s.layout.micro_batch, s.layout.seq_len, s.layout.dtype);
  if (!o.save_dir.empty()) create_size_proposal_dir(o.save_dir);
  int i = 0;
  for (const SizeProposal& sp : props) {
    const ZayaConfig& c = sp.config;
    fmt::print(
        "\n[{}] hidden {}, {} blocks, {}q/{}kv heads x {}, {} experts x "
        "{} top-{}, router {}, vocab {}: "
        "{:.3f}B total, {:.3f}B active\n",
        ++i, c.hidden, c.num_blocks, c.q_heads, c.kv_heads, c.head_dim, c.experts, c.expert_ffn, c.top_k,
        c.router_hidden, c.vocab_size, sp.total_params / 1e9, sp.active_params / 1e9);
    for (const std::string& r : sp.reasons) fmt::print("    - {}\n", r);
    if (!o.save_dir.empty()) fmt::print("    saved {}\n", save_size_proposal(o.save_dir, i, c));
  }
}

}  // namespace

void add_size_command(CLI::App& app) {
  auto o = std::make_shared<SizeCliOptions>();
  auto* cmd = app.add_subcommand("size", "propose hardware-aware ZAYA1-style configs, or --check one");
  add_plan_common_options(*cmd, o->common);
  cmd->add_option("--check", o->check,
                  "flag the inefficient dimensions of this config (preset, "
                  "config.json, dir)");
  cmd->add_option("--total", o->total, "target total parameters (e.g. 8.8e9)")->check(CLI::PositiveNumber);
  cmd->add_option("--active", o->active, "target active parameters per token")->check(CLI::PositiveNumber);
  cmd->add_option("--compute", o->compute, "training budget in FLOPs (compute-optimal: 6 N x 20 N)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--count", o->count, "proposals shown")->check(CLI::Range(1, 20));
  cmd->add_option("--save", o->save_dir, "write each proposal as DIR/proposalN.json (HF config.json keys)");
  cmd->callback([o] { run_size(*o); });
}

}  // namespace zaya::cli
