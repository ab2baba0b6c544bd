#pragma once
// Each verb of the `zaya` program registers its options and its action here.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace zaya::cli {

void add_info_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_rl_command(CLI::App& app);  // zaya rl (GRPO with verifiable rewards)
void add_generate_command(CLI::App& app);
void add_score_command(CLI::App& app);
void add_serve_command(CLI::App& app);  // zaya serve (OpenAI-compatible HTTP server)
void add_bench_command(CLI::App& app);  // "bench", with the subcommands below
void add_eval_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_ckpt_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_size_command(CLI::App& app);     // zaya size (hardware-aware sizing)
void add_plan_command(CLI::App& app);     // zaya plan (step time / memory / latency)
void add_profile_command(CLI::App& app);  // zaya profile (hardware profiles)
void add_help_command(CLI::App& app);     // zaya help [VERB]: after every other verb
// What follows `--` on a `zaya launch` command line (main() splits it off).
std::vector<std::string>& launch_job_args();

// Subcommands of `zaya bench` (each in its own cmd_bench_*.cc).
void add_bench_train_command(CLI::App& bench);
void add_bench_comm_command(CLI::App& bench);
void add_bench_gemm_command(CLI::App& bench);
void add_bench_membw_command(CLI::App& bench);
void add_bench_io_command(CLI::App& bench);
void add_bench_infer_command(CLI::App& bench);

}  // namespace zaya::cli
