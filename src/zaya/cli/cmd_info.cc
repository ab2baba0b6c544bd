// zaya info: a model's configuration and parameter counts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "zaya/cli/commands.h"
#include "zaya/core/count_units.h"
#include "zaya/core/error.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/layout_counts.h"
#include "zaya/formats/model_directory.h"
#include "zaya/formats/quantized_experts.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/model/params.h"
#include "zaya/train/train_config.h"

namespace zaya::cli {

void add_info_command(CLI::App& app) {
  struct Options {
    std::string preset, config, model, json_out;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("info", "print a model's configuration and parameter counts");
  cmd->add_option("--preset", o->preset, "a built-in preset: tiny, small, zaya1-base, zaya1-8b, zaya1-74b");
  cmd->add_option("--config", o->config, "a training config (TOML)");
  cmd->add_option("--model", o->model,
                  "a model directory (config.json, legacy or native layout) or a .gguf file from zaya ckpt export");
  cmd->add_option("--json", o->json_out, "also write the counts as JSON to this file");
  cmd->callback([o] {
    const std::string *preset = &o->preset, *config = &o->config, *model = &o->model, *json_out = &o->json_out;
    const int given = !preset->empty() + !config->empty() + !model->empty();
    ZAYA_CHECK_USAGE(given == 1, "zaya info: give exactly one of --preset, --config, --model");
    ZayaConfig c;
    std::string name;
    ExpertQuant quant;  // a model directory's quantized experts (formats/quantized_experts.h)
    if (!preset->empty()) {
      c = preset_config(*preset);
      name = "preset " + *preset;
    } else if (!config->empty()) {
      c = load_train_config(*config).model;
      name = *config;
    } else if (std::error_code ec; std::filesystem::is_regular_file(*model, ec)) {
      c = ZayaGgufFile::open(*model).config();  // the same config as the directory it was exported from
      name = *model;
    } else {
      c = read_model_directory_config(*model);
      name = *model;
      const std::string config_path = (std::filesystem::path(*model) / "config.json").string();
      quant = parse_expert_quant(read_json_file(config_path, "", "a model directory holds config.json"), config_path);
    }
    const ParamCounts p = count_parameters(c);
    fmt::print("{}\n", name);
    fmt::print("  layout: {} blocks = {} half-layers (CCA attention, MoE), hidden {}, vocab {} ({} real)\n",
               c.num_blocks, c.half_layers(), c.hidden, c.vocab_size, c.real_vocab_size);
    fmt::print("  attention: CCGQA {} query heads, {} KV heads, head dim {}, rotary dim {}, theta {:g}\n", c.q_heads,
               c.kv_heads, c.head_dim, c.rotary_dim(), c.rope_theta);
    if (c.has_sliding())
      fmt::print("  sliding window: {} keys per query (the query included) on {}, {} of {} blocks, theta {:g} there\n",
                 c.sliding_window, describe_sliding_blocks(c), c.sliding_blocks.size(), c.num_blocks,
                 c.sliding_rope_theta);
    else
      fmt::print("  sliding window: none (every block attends to the whole prefix)\n");
    fmt::print("  MoE: {} experts of width {}{}, top-{}, router width {}{}\n", c.experts, c.expert_ffn,
               c.use_skip ? " + skip expert" : "", c.top_k, c.router_hidden, c.use_eda ? " with EDA" : "");
    // Routed experts' bytes per layer: fc1 [2F, D] and fc2 [D, F] of every expert.
    const int64_t expert_weights = c.experts * 3 * c.expert_ffn * c.hidden;
    const int64_t expert_bytes = c.experts * (quantized_matrix_bytes(quant, 2 * c.expert_ffn, c.hidden) +
                                              quantized_matrix_bytes(quant, c.hidden, c.expert_ffn));
    fmt::print("  experts: {}, {:L} bytes per layer ({:.2f} bits per weight; bf16 {:L})\n", quant.description(),
               expert_bytes, 8.0 * double(expert_bytes) / double(std::max<int64_t>(expert_weights, 1)),
               2 * expert_weights);
    // One unit for the four, the total's, so they compare at a glance (1.55M / 0.44M; 8.84B / 1.29B).
    const CountUnit u = count_unit(double(p.total));
    auto in_unit = [&](int64_t n) { return format_count(double(n), u); };
    fmt::print("  parameters: {:>15L} total ({})\n", p.total, in_unit(p.total));
    fmt::print("              {:>15L} without the embedding ({})\n", p.total_without_embedding(),
               in_unit(p.total_without_embedding()));
    fmt::print("              {:>15L} active per token, without the embedding ({})\n", p.active_without_embedding(),
               in_unit(p.active_without_embedding()));
    fmt::print("              {:>15L} active per token, with the embedding ({})\n", p.active, in_unit(p.active));
    const LayoutTensorCounts n = layout_tensor_counts(c);
    fmt::print("  tensors: {:L} legacy, {:L} native, {:L} GGUF\n", n.legacy, n.native, n.gguf);
    if (const std::string note = zaya_branch_note(c); !note.empty()) fmt::print("  note: {}\n", note);
    if (!json_out->empty()) {
      nlohmann::json j = {{"model", name},
                          {"tensors", {{"legacy", n.legacy}, {"native", n.native}, {"gguf", n.gguf}}},
                          {"sliding_window",
                           {{"window", c.has_sliding() ? c.sliding_window : 0},
                            {"blocks", c.has_sliding() ? c.sliding_blocks : std::vector<int64_t>{}},
                            {"rope_theta", c.sliding_rope_theta}}},
                          {"rope_theta", c.rope_theta},
                          {"loads_in_zaya_branch", c.fits_zaya_branch()},
                          {"total", p.total},
                          {"embedding", p.embedding},
                          {"total_without_embedding", p.total_without_embedding()},
                          {"active", p.active},
                          {"active_without_embedding", p.active_without_embedding()}};
      j["experts"] = {{"format", quant.description()}, {"bytes_per_layer", expert_bytes}};
      write_file_atomic(*json_out, j.dump() + "\n");
    }
  });
}

}  // namespace zaya::cli
