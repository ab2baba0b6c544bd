#include "zaya/model/config_fields.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zaya/core/error.h"
#include "zaya/ops/cca_conv.h"

namespace zaya {
namespace {

using C = ZayaConfig;
using J = JsonForm;
using G = GgufForm;

constexpr double k2e24 = double(int64_t(1) << 24);
// GGUF read bounds: checked before a value enters the config, so that no size product in ParamTable (or
// ZayaConfig::validate) can overflow int64 on a hostile file.
constexpr int64_t kGgufMaxSize = int64_t{1} << 20;     // widths: hidden, ffn, router
constexpr int64_t kGgufMaxHeadDim = int64_t{1} << 16;  // head size
constexpr int64_t kGgufMaxHeads = int64_t{1} << 12;    // head counts
constexpr int64_t kGgufMaxVocab = int64_t{1} << 31;    // vocabulary, context, token ids

// clang-format off
const ConfigField kFields[] = {
    // member, ptr, toml key, lo, hi, float literal,
    //   legacy config.json, native config.json,
    //   GGUF {key, form, slot, f64 twin, lo, hi}, diff, absent, doc
    {"hidden", &C::hidden, "hidden_size", 8, 65536, false,
     {"hidden_size", J::kScalar}, {"hidden_size", J::kScalar},
     {"zaya.embedding_length", G::kRequired, 2, nullptr, 1, kGgufMaxSize}, DiffRule::kAlways, AbsentRule::kDefault,
     "residual stream width D"},
    {"num_blocks", &C::num_blocks, "num_blocks", 1, 1024, false,
     {"zaya_layers", J::kCustom}, {"num_hidden_layers", J::kScalar},
     {"zaya.block_count", G::kRequired, 3, nullptr, 1, 1024}, DiffRule::kAlways, AbsentRule::kDefault,
     "attention + MoE block pairs (legacy: zaya_layers = ['a', E] * num_blocks)"},
    {"vocab_size", &C::vocab_size, "vocab_size", 4, k2e24, false,
     {"vocab_size", J::kScalar}, {"vocab_size", J::kScalar},
     {"zaya.vocab_size", G::kRequired, 4, nullptr, 1, kGgufMaxVocab}, DiffRule::kAlways, AbsentRule::kDefault,
     "rows of the embedding, padded (spec §7)"},
    {"real_vocab_size", &C::real_vocab_size, "real_vocab_size", 4, k2e24, false,
     {"zaya_real_vocab_size", J::kScalar}, {"zaya_real_vocab_size", J::kScalar},
     {"zaya.real_vocab_size", G::kOptional, 5, nullptr, 1, kGgufMaxVocab}, DiffRule::kAlways, AbsentRule::kVocabSize,
     "tokenizer entries; ids >= this are padding rows, never predicted"},
    {"q_heads", &C::q_heads, "q_heads", 1, 1024, false,
     {"cca_num_q_heads", J::kAttnList}, {"num_attention_heads", J::kScalar},
     {"zaya.attention.head_count", G::kRequired, 6, nullptr, 1, kGgufMaxHeads}, DiffRule::kAlways,
     AbsentRule::kDefault, "CCA query heads Hq (spec §3)"},
    {"kv_heads", &C::kv_heads, "kv_heads", 1, 1024, false,
     {"num_query_groups_list", J::kAttnList, "num_key_value_heads", true}, {"num_key_value_heads", J::kScalar},
     {"zaya.attention.head_count_kv", G::kRequired, 7, nullptr, 1, kGgufMaxHeads}, DiffRule::kAlways,
     AbsentRule::kDefault, "key/value heads Hk, a divisor of q_heads"},
    {"head_dim", &C::head_dim, "head_dim", 2, 4096, false,
     {"kv_channels", J::kCustom}, {"head_dim", J::kScalar},
     {"zaya.attention.key_length", G::kCustom, 8, nullptr, 1, kGgufMaxHeadDim}, DiffRule::kAlways,
     AbsentRule::kDefault, "head size d (legacy: head_dim, kv_channels or hidden / num_attention_heads)"},
    {"rope_theta", &C::rope_theta, "rope_theta", 1.0, 1e12, true,
     {"rope_theta", J::kScalar}, {"rope_parameters", J::kCustom},
     {"zaya.rope.freq_base", G::kRequired, 12, "zaya.rope.freq_base_f64"}, DiffRule::kAlways, AbsentRule::kDefault,
     "RoPE base of full-attention blocks"},
    {"partial_rotary_factor", &C::partial_rotary_factor, "partial_rotary_factor", 0.0, 1.0, false,
     {"partial_rotary_factor", J::kScalar}, {"rope_parameters", J::kCustom},
     {"zaya.rope.partial_rotary_factor", G::kCustom, 13}, DiffRule::kAlways, AbsentRule::kDefault,
     "fraction of head_dim that is rotated"},
    {"max_position", &C::max_position, "max_position_embeddings", 1, k2e24, false,
     {"max_position_embeddings", J::kScalar}, {"max_position_embeddings", J::kScalar},
     {"zaya.context_length", G::kRequired, 1, nullptr, 1, kGgufMaxVocab}, DiffRule::kAlways, AbsentRule::kDefault,
     "longest context"},
    {"experts", &C::experts, "experts", 1, 63, false,
     {"zaya_layers", J::kCustom}, {"num_experts", J::kScalar},
     {"zaya.expert_count", G::kRequired, 14, nullptr, 1, 1024}, DiffRule::kAlways, AbsentRule::kDefault,
     "real experts E (slot E is the skip expert when use_skip)"},
    {"expert_ffn", &C::expert_ffn, "expert_ffn", 1, 1 << 20, false,
     {"ffn_hidden_size_list", J::kMoeListTwice}, {"moe_intermediate_size", J::kScalar},
     {"zaya.expert_feed_forward_length", G::kRequired, 16, nullptr, 1, kGgufMaxSize}, DiffRule::kAlways,
     AbsentRule::kDefault, "expert intermediate size F (fc1 has 2F rows)"},
    {"router_hidden", &C::router_hidden, "router_hidden", 1, 1 << 16, false,
     {"zaya_mlp_expansion", J::kMoeList}, {"router_hidden_size", J::kScalar},
     {"zaya.router.hidden_size", G::kRequired, 17, nullptr, 1, kGgufMaxSize}, DiffRule::kAlways,
     AbsentRule::kDefault, "router MLP width R (spec §4)"},
    {"top_k", &C::top_k, "top_k", 1, 63, false,
     {"moe_router_topk", J::kScalar}, {"num_experts_per_tok", J::kScalar},
     {"zaya.expert_used_count", G::kRequired, 15, nullptr, 1, 1024}, DiffRule::kAlways, AbsentRule::kDefault,
     "experts per token"},
    {"use_skip", &C::use_skip, "use_skip", 0, 0, false,
     {"zaya_use_mod", J::kScalar}, {},
     {"zaya.router.skip_expert", G::kRequired, 18}, DiffRule::kAlways, AbsentRule::kDefault,
     "the router's skip expert (native: always)"},
    {"use_eda", &C::use_eda, "use_eda", 0, 0, false,
     {"zaya_use_eda", J::kScalar}, {},
     {"zaya.router.eda", G::kRequired, 19}, DiffRule::kAlways, AbsentRule::kDefault,
     "the router's exponential depth averaging (native: always)"},
    {"skip_output_zero", &C::skip_output_zero, "skip_output_zero", 0, 0, false,
     {"zaya_skip_output_zero", J::kCustom}, {"zaya_skip_output_zero", J::kCustom},
     {"zaya.router.skip_output_zero", G::kOptional, 28}, DiffRule::kAlways, AbsentRule::kDefault,
     "a token routed to the skip slot gets 0 (native layout) instead of p_skip * x (legacy; spec §8.1)"},
    {"norm_eps", &C::norm_eps, "norm_eps", 1e-12, 1.0, false,
     {"norm_epsilon", J::kScalar, "rms_norm_eps"}, {"rms_norm_eps", J::kScalar},
     {"zaya.attention.layer_norm_rms_epsilon", G::kRequired, 11, "zaya.attention.layer_norm_rms_epsilon_f64"},
     DiffRule::kAlways, AbsentRule::kDefault, "RMSNorm epsilon"},
    {"router_norm_eps", &C::router_norm_eps, "router_norm_eps", 1e-12, 1.0, false,
     {"zaya_router_norm_eps", J::kScalar, "layernorm_epsilon"}, {"zaya_router_norm_eps", J::kCustom},
     {"zaya.router.norm_epsilon", G::kRequired, 20}, DiffRule::kAlways, AbsentRule::kDefault,
     "the router's RMSNorm epsilon (legacy default 1e-6, native: rms_norm_eps; spec §8.2)"},
    {"rope_precision", &C::rope_precision, "rope_precision", 0, 0, false,
     {"zaya_rope_precision", J::kCustom}, {"zaya_rope_precision", J::kCustom},
     {"zaya.rope.precision", G::kCustom, 23}, DiffRule::kNever, AbsentRule::kDefault,
     "RoPE angles in float64 (default) or the reference's float32 (spec §11)"},
    {"scale_residual_merge", &C::scale_residual_merge, "scale_residual_merge", 0, 0, false,
     {"scale_residual_merge", J::kScalar}, {},
     {"zaya.residual_merge_scaled", G::kOptional, 21}, DiffRule::kAlways, AbsentRule::kDefault,
     "false: every residual merge is a plain sum (spec §5)"},
    {"tie_word_embeddings", &C::tie_word_embeddings, "tie_word_embeddings", 0, 0, false,
     {"tie_word_embeddings", J::kScalar}, {"tie_word_embeddings", J::kScalar},
     {"zaya.tie_word_embeddings", G::kOptional, 22}, DiffRule::kAlways, AbsentRule::kDefault,
     "false: an own lm_head.weight"},
    {"conv_kernel0", &C::conv_kernel0, "cca_time0", 1, kCcaConvMaxTaps, false,
     {"cca_time0", J::kScalar}, {"cca_time0", J::kScalar},
     {"zaya.attention.conv_kernel_depthwise", G::kOptional, 9, nullptr, 1, 64}, DiffRule::kAlways,
     AbsentRule::kDefault, "depthwise convolution taps (spec §3)"},
    {"conv_kernel1", &C::conv_kernel1, "cca_time1", 1, kCcaConvMaxTaps, false,
     {"cca_time1", J::kScalar}, {"cca_time1", J::kScalar},
     {"zaya.attention.conv_kernel_grouped", G::kOptional, 10, nullptr, 1, 64}, DiffRule::kAlways,
     AbsentRule::kDefault, "grouped convolution taps"},
    {"sliding_window", &C::sliding_window, "sliding_window", 0, double(int64_t(1) << 30), false,
     {"swa_layers", J::kCustom}, {"sliding_window", J::kCustom},
     {"zaya.attention.sliding_window", G::kCustom, 27}, DiffRule::kAlways, AbsentRule::kDefault,
     "keys a sliding block's query sees, itself included (0: none; spec §12)"},
    {"sliding_blocks", &C::sliding_blocks, "sliding_blocks", 0, 0, false,
     {"swa_layers", J::kCustom}, {"layer_types", J::kCustom},
     {"zaya.attention.sliding_window_pattern", G::kCustom, 27}, DiffRule::kAlways, AbsentRule::kDefault,
     "the sliding blocks: a list, or \"even\", \"all\", \"none\" in TOML"},
    {"sliding_rope_theta", &C::sliding_rope_theta, "sliding_rope_theta", 1.0, 1e12, true,
     {"swa_rotary_base", J::kCustom}, {"rope_parameters", J::kCustom},
     {"zaya.rope.freq_base_swa", G::kCustom, 27}, DiffRule::kWhenSliding, AbsentRule::kDefault,
     "RoPE base of sliding blocks"},
    {"bos_token_id", &C::bos_token_id, nullptr, 0, 0, false,
     {"bos_token_id", J::kScalar}, {"bos_token_id", J::kScalar},
     {"tokenizer.ggml.bos_token_id", G::kOptional, 24, nullptr, 0, kGgufMaxVocab}, DiffRule::kNever,
     AbsentRule::kDefault, "document start"},
    {"eos_token_id", &C::eos_token_id, nullptr, 0, 0, false,
     {"eos_token_id", J::kCustom}, {"eos_token_id", J::kCustom},
     {"tokenizer.ggml.eos_token_id", G::kOptional, 25, nullptr, 0, kGgufMaxVocab}, DiffRule::kNever,
     AbsentRule::kDefault, "document end (config.json: the first of a list)"},
    {"pad_token_id", &C::pad_token_id, nullptr, 0, 0, false,
     {"pad_token_id", J::kScalar}, {"pad_token_id", J::kScalar},
     {"tokenizer.ggml.padding_token_id", G::kOptional, 26, nullptr, 0, kGgufMaxVocab}, DiffRule::kNever,
     AbsentRule::kDefault, "padding"},
    {"eos_token_ids", &C::eos_token_ids, nullptr, 0, 0, false,
     {"eos_token_id", J::kCustom}, {"eos_token_id", J::kCustom},
     {}, DiffRule::kNever, AbsentRule::kDefault, "every stop id when config.json's eos_token_id is a list"},
};
// clang-format on

}  // namespace

std::span<const ConfigField> zaya_config_fields() { return kFields; }

const ConfigField& zaya_config_field(std::string_view member) {
  for (const ConfigField& f : kFields)
    if (member == f.member) return f;
  fail("internal error: ZayaConfig has no field '{}' in its table (model/config_fields.cc)", member);
}

std::string config_field_text(const ConfigField& field, const ZayaConfig& c) {
  return std::visit(
      [&](auto ptr) -> std::string {
        const auto& v = c.*ptr;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, RopePrecision>)
          return enum_name<RopePrecision>(kRopePrecisionNames, v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return fmt::format("[{}]", fmt::join(v, ", "));
        else
          return fmt::format("{}", v);
      },
      field.ptr);
}

bool config_field_equal(const ConfigField& field, const ZayaConfig& a, const ZayaConfig& b) {
  return std::visit([&](auto ptr) { return a.*ptr == b.*ptr; }, field.ptr);
}

}  // namespace zaya
