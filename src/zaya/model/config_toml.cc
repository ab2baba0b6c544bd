#include "zaya/model/config_toml.h"

#include <fmt/format.h>

#include <vector>

#include "zaya/io/toml_section.h"
#include "zaya/ops/cca_conv.h"

namespace zaya {
namespace {

const std::vector<std::string> kModelKeys = {"preset",
                                             "hidden_size",
                                             "num_blocks",
                                             "vocab_size",
                                             "real_vocab_size",
                                             "q_heads",
                                             "kv_heads",
                                             "head_dim",
                                             "rope_theta",
                                             "partial_rotary_factor",
                                             "max_position_embeddings",
                                             "experts",
                                             "expert_ffn",
                                             "router_hidden",
                                             "top_k",
                                             "use_skip",
                                             "use_eda",
                                             "norm_eps",
                                             "router_norm_eps",
                                             "sliding_window",
                                             "sliding_blocks",
                                             "sliding_rope_theta",
                                             "cca_time0",
                                             "cca_time1",
                                             "rope_precision",
                                             "scale_residual_merge",
                                             "tie_word_embeddings",
                                             "init_from"};

}  // namespace

ModelTable parse_model_table(const toml::table* table, const std::string& source) {
  TomlSection m(table, "model", source);
  ModelTable t;
  t.preset = m.get_string("preset", "tiny", preset_names());
  ZayaConfig& c = t.config;
  c = preset_config(t.preset);
  c.hidden = m.get_int("hidden_size", c.hidden, 8, 65536);
  c.num_blocks = m.get_int("num_blocks", c.num_blocks, 1, 1024);
  t.vocab_from_tokenizer = !m.has("vocab_size") && !m.has("real_vocab_size");
  c.vocab_size = m.get_int("vocab_size", c.vocab_size, 4, int64_t(1) << 24);
  c.real_vocab_size =
      m.get_int("real_vocab_size", m.has("vocab_size") ? c.vocab_size : c.real_vocab_size, 4, int64_t(1) << 24);
  c.q_heads = m.get_int("q_heads", c.q_heads, 1, 1024);
  c.kv_heads = m.get_int("kv_heads", c.kv_heads, 1, 1024);
  c.head_dim = m.get_int("head_dim", c.head_dim, 2, 4096);
  c.rope_theta = m.get_double("rope_theta", c.rope_theta, 1.0, 1e12);
  c.rope_precision =
      m.get_string("rope_precision", c.rope_precision == RopePrecision::kF32 ? "f32" : "f64", {"f32", "f64"}) == "f32"
          ? RopePrecision::kF32
          : RopePrecision::kF64;
  c.partial_rotary_factor = m.get_double("partial_rotary_factor", c.partial_rotary_factor, 0.0, 1.0);
  c.max_position = m.get_int("max_position_embeddings", c.max_position, 1, int64_t(1) << 24);
  c.experts = m.get_int("experts", c.experts, 1, 63);
  c.expert_ffn = m.get_int("expert_ffn", c.expert_ffn, 1, 1 << 20);
  c.router_hidden = m.get_int("router_hidden", c.router_hidden, 1, 1 << 16);
  c.top_k = m.get_int("top_k", c.top_k, 1, 63);
  c.use_skip = m.get_bool("use_skip", c.use_skip);
  c.use_eda = m.get_bool("use_eda", c.use_eda);
  c.scale_residual_merge = m.get_bool("scale_residual_merge", c.scale_residual_merge);
  c.tie_word_embeddings = m.get_bool("tie_word_embeddings", c.tie_word_embeddings);
  // The two CCA convolutions' taps (HF config cca_time0 / cca_time1; ZayaConfig::validate checks them).
  c.conv_kernel0 = m.get_int("cca_time0", c.conv_kernel0, 1, kCcaConvMaxTaps);
  c.conv_kernel1 = m.get_int("cca_time1", c.conv_kernel1, 1, kCcaConvMaxTaps);
  c.norm_eps = m.get_double("norm_eps", c.norm_eps, 1e-12, 1.0);
  c.router_norm_eps = m.get_double("router_norm_eps", c.router_norm_eps, 1e-12, 1.0);
  // Sliding windows (spec §12): a window alone slides the even blocks (the 74B's pattern); sliding_blocks is
  // "even", "all", "none" or a list of block indices.
  c.sliding_window = m.get_int("sliding_window", c.sliding_window, 0, int64_t(1) << 30);
  const toml::node* blocks = table == nullptr ? nullptr : table->get("sliding_blocks");
  if (blocks != nullptr && blocks->is_array()) {
    c.sliding_blocks = m.get_int_list("sliding_blocks", {}, 0, c.num_blocks - 1);
  } else if (blocks != nullptr || m.has("sliding_window") || m.has("num_blocks")) {
    const std::string pattern =
        m.get_string("sliding_blocks", c.sliding_window > 0 ? "even" : "none", {"even", "all", "none"});
    c.sliding_blocks = sliding_block_pattern(pattern, c.num_blocks, source);
  }
  if (c.sliding_window == 0 && blocks == nullptr) c.sliding_blocks.clear();
  c.sliding_rope_theta = m.get_double("sliding_rope_theta", c.sliding_rope_theta, 1.0, 1e12);
  // A model directory (either layout) whose weights a fresh run starts from; checked against the sizes at start-up.
  t.init_from = m.get_string("init_from", "");
  m.finish(kModelKeys);
  return t;
}

std::string model_table_to_toml(const std::string& preset, const ZayaConfig& c, const std::string& init_from) {
  std::string s;
  s += fmt::format("[model]\npreset = \"{}\"\nhidden_size = {}\nnum_blocks = {}\nvocab_size = {}\n", preset, c.hidden,
                   c.num_blocks, c.vocab_size);
  s += fmt::format("real_vocab_size = {}\nq_heads = {}\nkv_heads = {}\nhead_dim = {}\nrope_theta = {:.1f}\n",
                   c.real_vocab_size, c.q_heads, c.kv_heads, c.head_dim, c.rope_theta);
  s += fmt::format("partial_rotary_factor = {}\nmax_position_embeddings = {}\nexperts = {}\nexpert_ffn = {}\n",
                   c.partial_rotary_factor, c.max_position, c.experts, c.expert_ffn);
  s += fmt::format("router_hidden = {}\ntop_k = {}\nuse_skip = {}\nuse_eda = {}\nnorm_eps = {}\n", c.router_hidden,
                   c.top_k, c.use_skip, c.use_eda, c.norm_eps);
  s += fmt::format("router_norm_eps = {}\nrope_precision = \"{}\"\n", c.router_norm_eps,
                   c.rope_precision == RopePrecision::kF32 ? "f32" : "f64");
  s += fmt::format("scale_residual_merge = {}\ntie_word_embeddings = {}\n", c.scale_residual_merge,
                   c.tie_word_embeddings);
  s += fmt::format("cca_time0 = {}\ncca_time1 = {}\n", c.conv_kernel0, c.conv_kernel1);
  s += fmt::format("sliding_window = {}\nsliding_blocks = [{}]\nsliding_rope_theta = {:.1f}\n\n", c.sliding_window,
                   fmt::join(c.sliding_blocks, ", "), c.sliding_rope_theta);
  if (!init_from.empty()) s.insert(s.size() - 1, fmt::format("init_from = \"{}\"\n", init_from));
  return s;
}

}  // namespace zaya
