#pragma once
// Each verb of the `zaya` program registers its options and its action here.

#include <CLI/CLI.hpp>

namespace zaya::cli {

void add_info_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_score_command(CLI::App& app);
void add_bench_command(CLI::App& app);

}  // namespace zaya::cli
