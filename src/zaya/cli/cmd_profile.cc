// zaya profile: hardware profiles for the planner (src/zaya/plan/profile_job.h).
//   zaya profile measure [--model PRESET ...] --out FILE    this machine (under mpirun: with its network)
//   zaya profile show NAME|FILE                             a built-in or saved profile, each figure's source
//   zaya profile add-comm NAME|FILE --comm FILE --out FILE  network curves from zaya bench comm --json
//   zaya profile list                                       the built-in profiles
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/dist/comm.h"
#include "zaya/plan/builtin_profiles.h"
#include "zaya/plan/profile_job.h"

namespace zaya::cli {
namespace {

struct ProfileCliOptions {
  ProfileMeasureOptions measure;
  std::string out, show_name;
  std::vector<std::string> comm_files;
  std::string scope = "intra";
};

void add_comm(const ProfileCliOptions& o) {
  HardwareProfile p = resolve_profile(o.show_name);
  for (const std::string& path : o.comm_files)
    fmt::print("{}: {} curve(s) ({} scope)\n", path, add_comm_file(p, path, o.scope).size(), o.scope);
  save_validated_profile(p, o.out);
  fmt::print("wrote {}\n", o.out);
}

void print_figure(const char* what, const Figure& f, const char* unit) {
  fmt::print("  {:<22} {:>12.4g} {:<8} {:<9} {}\n", what, f.value, unit, f.source, f.note);
}

void show(const HardwareProfile& p) {
  fmt::print(
      "{}: {}\n  kind {}, {} compute units, GEMM tile {}x{}, align {}, "
      "{} per node, up to {} devices\n",
      p.name, p.description, p.device_kind, p.compute_units, p.tile_m, p.tile_n, p.align, p.devices_per_node,
      p.max_devices);
  print_figure("peak f32", p.peak_f32_gflops, "GFLOP/s");
  print_figure("peak bf16", p.peak_bf16_gflops, "GFLOP/s");
  print_figure("memory bandwidth", p.membw_gbps, "GB/s");
  print_figure("stream (element-wise)", p.stream_gbps, "GB/s");
  print_figure("memory", p.memory_gib, "GiB");
  print_figure("GEMM efficiency", p.gemm_efficiency, "");
  print_figure("exp rate", p.exp_per_second, "/s");
  print_figure("op overhead", p.op_overhead_us, "us");
  for (const CommCurve& c : p.comm)
    fmt::print(
        "  {:<15} {:>5} ranks {:<6} {:<9} busbw {:.2f} GB/s at {:.0f} "
        "KiB .. {:.2f} GB/s at {:.0f} MiB\n",
        c.collective, c.ranks, c.scope, c.source, c.points.front().busbw_gbps, c.points.front().bytes / 1024,
        c.points.back().busbw_gbps, c.points.back().bytes / (1 << 20));
  if (p.gemm_table) fmt::print("  GEMM table: {} measured shapes\n", p.gemm_table->entries.size());
}

void measure(const ProfileCliOptions& o) {
  auto world = make_world_comm();
  const std::optional<HardwareProfile> p = measure_profile_to_file(o.measure, *world, o.out, [](const std::string& s) {
    fmt::print("{}\n", s);
    std::fflush(stdout);
  });
  if (!p) return;
  show(*p);
  fmt::print("wrote {}\n", o.out);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto o = std::make_shared<ProfileCliOptions>();
  auto* cmd = app.add_subcommand("profile", "hardware profiles for zaya plan / zaya size: measure, show, list");
  cmd->require_subcommand(1);
  auto* m = cmd->add_subcommand("measure",
                                "measure this machine (GEMMs, bandwidth, "
                                "network under mpirun) into a profile");
  m->add_option("--out", o->out, "profile JSON to write")->required();
  m->add_option("--name", o->measure.name, "profile name")->capture_default_str();
  m->add_option("--model", o->measure.models, "also measure these models' exact GEMMs (preset, config.json, dir)");
  m->add_option("--micro-batch", o->measure.micro_batches, "--model: sequences per micro-batch (one or more)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 16))
      ->delimiter(',');
  m->add_option("--seq-len", o->measure.seq_lens, "--model: tokens per sequence (one or more)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->delimiter(',');
  m->add_option("--ep", o->measure.ep, "--model: expert-parallel ranks")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  m->add_option("--gemm-min-time", o->measure.gemm_min_seconds, "seconds per GEMM shape")->check(CLI::Range(0.0, 10.0));
  m->add_flag("--quick", o->measure.quick, "tiny sweeps (tests, smoke runs)");
  m->callback([o] { measure(*o); });
  auto* s = cmd->add_subcommand("show", "print a built-in or saved profile with the source of each figure");
  s->add_option("profile", o->show_name, "built-in name or profile JSON")->required();
  s->callback([o] { show(resolve_profile(o->show_name)); });
  auto* a = cmd->add_subcommand("add-comm",
                                "put `zaya bench comm --json` curves into a profile (replacing the same "
                                "collective, group size and scope)");
  a->add_option("profile", o->show_name, "built-in name or profile JSON to start from")->required();
  a->add_option("--comm", o->comm_files, "zaya bench comm --json files")->required();
  a->add_option("--scope", o->scope, "where the ranks sat: intra (one node) or inter (across nodes)")
      ->check(CLI::IsMember({"intra", "inter"}));
  a->add_option("--out", o->out, "profile JSON to write")->required();
  a->callback([o] { add_comm(*o); });
  auto* l = cmd->add_subcommand("list", "list the built-in profiles");
  l->callback([] {
    for (const HardwareProfile& p : builtin_profiles()) fmt::print("{:<16} {}\n", p.name, p.description);
  });
}

}  // namespace zaya::cli
