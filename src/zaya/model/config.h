#pragma once
// ZayaConfig: every size of a ZAYA1-family model (spec §2), in the legacy
// layout of ZAYA1-base: `num_blocks` pairs of half-layers, even = CCA
// attention, odd = MoE. Presets: tiny, small, zaya1-base.

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct ZayaConfig {
  // Residual stream and vocabulary.
  int64_t hidden = 2048;             // hidden_size (D)
  int64_t num_blocks = 40;           // attention+MoE pairs; zaya_layers = ['a', E] * num_blocks
  int64_t vocab_size = 262272;       // rows of the tied embedding, padded (spec §7)
  int64_t real_vocab_size = 262144;  // tokenizer entries; ids >= this are padding rows, never predicted
  // CCA / CCGQA attention (spec §3).
  int64_t q_heads = 8;       // cca_num_q_heads (Hq)
  int64_t kv_heads = 2;      // num_query_groups (Hk)
  int64_t head_dim = 128;    // kv_channels (d)
  int64_t conv_kernel0 = 2;  // cca_time0: depthwise conv kernel
  int64_t conv_kernel1 = 2;  // cca_time1: grouped conv kernel
  double rope_theta = 1e6;
  double partial_rotary_factor = 0.5;
  int64_t max_position = 32768;  // max_position_embeddings
  // MoE (spec §4).
  int64_t experts = 16;         // real experts (E); slot E is the skip expert when use_skip
  int64_t expert_ffn = 2048;    // expert intermediate size (F); fc1 has 2F rows (gate, up)
  int64_t router_hidden = 256;  // zaya_mlp_expansion (R)
  int64_t top_k = 1;            // moe_router_topk
  bool use_skip = true;         // zaya_use_mod
  bool use_eda = true;          // zaya_use_eda
  // Norms.
  double norm_eps = 1e-5;         // norm_epsilon
  double router_norm_eps = 1e-6;  // the zaya-branch reference's fallback (spec §8.2)
  // Special token ids (Gemma 3 layout, spec §7).
  int64_t pad_token_id = 0, eos_token_id = 1, bos_token_id = 2;

  // Derived sizes.
  int64_t half_layers() const { return 2 * num_blocks; }
  int64_t q_width() const { return q_heads * head_dim; }    // 1024 for ZAYA1-base
  int64_t kv_width() const { return kv_heads * head_dim; }  // 256
  int64_t conv_channels() const { return q_width() + kv_width(); }
  int64_t value_stream_width() const { return kv_width() / 2; }  // val_proj1 / val_proj2 outputs
  int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
  int64_t router_slots() const { return experts + (use_skip ? 1 : 0); }
  int64_t skip_slot() const { return use_skip ? experts : -1; }
  // Legacy num_attention_heads: the uncompressed MHA head count, hidden / head_dim (spec §8.5).
  int64_t legacy_attention_heads() const { return hidden / head_dim; }

  // Throws zaya::Error naming `source` (a file or "preset X") and the bad field.
  void validate(const std::string& source) const;
};

// Named presets: "tiny", "small", "zaya1-base".
ZayaConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace zaya
