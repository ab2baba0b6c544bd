#include "zaya/model/config.h"

#include "zaya/core/error.h"

namespace zaya {
namespace {

void require(bool ok, const std::string& source, const char* field, int64_t value, const char* allowed) {
  if (!ok) fail("{}: {} = {} is invalid; allowed: {}", source, field, value, allowed);
}

}  // namespace

void ZayaConfig::validate(const std::string& source) const {
  // Plain fields first, so that the derived sizes below cannot overflow.
  require(hidden >= 8 && hidden <= 65536, source, "hidden_size", hidden, "8..65536");
  require(q_heads >= 1 && q_heads <= 4096, source, "cca_num_q_heads", q_heads, "1..4096");
  require(kv_heads >= 1 && kv_heads <= 4096, source, "num_query_groups", kv_heads, "1..4096");
  require(head_dim >= 2 && head_dim <= 65536, source, "kv_channels (head_dim)", head_dim, "2..65536");
  require(experts >= 1 && experts <= 63, source, "experts", experts, "1..63 (+ skip slot <= 64 slots)");
  require(vocab_size >= 1 && vocab_size <= (int64_t(1) << 31), source, "vocab_size", vocab_size, "1..2^31");
  require(expert_ffn >= 1 && expert_ffn <= (int64_t(1) << 20), source, "expert_ffn", expert_ffn, "1..2^20");
  require(router_hidden >= 1 && router_hidden <= 65536, source, "zaya_mlp_expansion", router_hidden, "1..65536");
  require(top_k >= 1 && top_k <= 63, source, "moe_router_topk", top_k, "1..63");
  require(num_blocks >= 1 && num_blocks <= 1024, source, "num_blocks", num_blocks, "1..1024");
  require(real_vocab_size >= 4, source, "real_vocab_size", real_vocab_size, ">= 4");
  require(vocab_size >= real_vocab_size, source, "vocab_size", vocab_size, ">= real_vocab_size (padded)");
  require(q_heads >= 1, source, "cca_num_q_heads", q_heads, ">= 1");
  require(kv_heads >= 1 && q_heads % kv_heads == 0, source, "num_query_groups", kv_heads,
          "a divisor of cca_num_q_heads");
  require(head_dim >= 2 && head_dim % 2 == 0, source, "kv_channels (head_dim)", head_dim, "an even number >= 2");
  require(kv_width() % 2 == 0, source, "num_query_groups * kv_channels", kv_width(),
          "an even number (values split into current and previous-token streams)");
  require(conv_kernel0 == 2, source, "cca_time0", conv_kernel0, "2 (the ZAYA1 kernel size)");
  require(conv_kernel1 == 2, source, "cca_time1", conv_kernel1, "2 (the ZAYA1 kernel size)");
  if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1) || rotary_dim() % 2 != 0 || rotary_dim() < 2)
    fail(
        "{}: partial_rotary_factor = {} is invalid; allowed: (0, 1] giving an even rotary dim >= 2 of "
        "head_dim {}",
        source, partial_rotary_factor, head_dim);
  if (!(rope_theta > 1)) fail("{}: rope_theta = {} is invalid; allowed: > 1", source, rope_theta);
  require(max_position >= 1, source, "max_position_embeddings", max_position, ">= 1");
  require(experts >= 1, source, "experts", experts, ">= 1");
  require(router_slots() <= 64, source, "experts (+ skip slot)", router_slots(), "<= 64 slots");
  require(top_k >= 1 && top_k <= experts, source, "moe_router_topk", top_k, "1..experts");
  require(expert_ffn >= 1, source, "expert_ffn", expert_ffn, ">= 1");
  require(router_hidden >= 1, source, "zaya_mlp_expansion", router_hidden, ">= 1");
  if (!(norm_eps > 0) || !(router_norm_eps > 0))
    fail("{}: norm_epsilon ({}) and router norm eps ({}) must be > 0", source, norm_eps, router_norm_eps);
  for (auto [name, id] : {std::pair{"pad_token_id", pad_token_id}, std::pair{"eos_token_id", eos_token_id},
                          std::pair{"bos_token_id", bos_token_id}})
    require(id >= 0 && id < real_vocab_size, source, name, id, "0..real_vocab_size-1");
}

ZayaConfig preset_config(const std::string& name) {
  ZayaConfig c;  // defaults are ZAYA1-base
  if (name == "zaya1-base") return c;
  if (name == "tiny") {
    // Trains on the bundled corpus in a few minutes on 2 cores (README).
    c.hidden = 128;
    c.num_blocks = 4;
    c.vocab_size = 4096;
    c.real_vocab_size = 4096;
    c.q_heads = 4;
    c.kv_heads = 2;
    c.head_dim = 32;
    c.rope_theta = 10000;
    c.max_position = 1024;
    c.experts = 4;
    c.expert_ffn = 128;
    c.router_hidden = 64;
    return c;
  }
  if (name == "small") {
    // Tens of millions of parameters; ZAYA1's ratios (q latent = D/2, F = D, head_dim 64).
    c.hidden = 512;
    c.num_blocks = 8;
    c.vocab_size = 8192;
    c.real_vocab_size = 8192;
    c.q_heads = 4;
    c.kv_heads = 2;
    c.head_dim = 64;
    c.rope_theta = 10000;
    c.max_position = 4096;
    c.experts = 8;
    c.expert_ffn = 512;
    c.router_hidden = 128;
    return c;
  }
  fail("unknown model preset '{}'; allowed: tiny, small, zaya1-base", name);
}

std::vector<std::string> preset_names() { return {"tiny", "small", "zaya1-base"}; }

}  // namespace zaya
