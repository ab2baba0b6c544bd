#pragma once
// ZayaConfig: every size of a ZAYA1-family model (spec §2), in the legacy
// layout of ZAYA1-base: `num_blocks` pairs of half-layers, even = CCA
// attention, odd = MoE. Presets: tiny, small, zaya1-base, zaya1-8b, zaya1-74b.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/ops/rope.h"

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
  double rope_theta = 1e6;   // RoPE base of full-attention blocks
  double partial_rotary_factor = 0.5;
  // How RoPE angles are computed (model.rope_precision, spec §11): float64 (the default, which every golden value
  // was made with) or the reference's float32 inverse frequencies and angles.
  RopePrecision rope_precision = RopePrecision::kF64;
  int64_t max_position = 32768;  // max_position_embeddings
  // Sliding-window attention (ZAYA1-74B-preview, spec §12). 0: every block attends to the whole prefix. On a
  // sliding block query i sees keys i-W+1..i (W counts the query itself: native `sliding_window`; legacy
  // `swa_layers` values are W-1). Positions stay absolute; the CCA convolutions and value shift are unchanged.
  int64_t sliding_window = 0;
  std::vector<int64_t> sliding_blocks;  // sorted block indices that slide (empty when sliding_window == 0)
  double sliding_rope_theta = 1e4;      // RoPE base of sliding blocks (rope_parameters.hybrid_sliding, swa_rotary_base)
  // MoE (spec §4).
  int64_t experts = 16;         // real experts (E); slot E is the skip expert when use_skip
  int64_t expert_ffn = 2048;    // expert intermediate size (F); fc1 has 2F rows (gate, up)
  int64_t router_hidden = 256;  // zaya_mlp_expansion (R)
  int64_t top_k = 1;            // moe_router_topk
  bool use_skip = true;         // zaya_use_mod
  bool use_eda = true;          // zaya_use_eda
  // What a token routed to the skip slot gets (spec §8.1): false, the legacy layout's rule (Zyphra's zaya branch,
  // ZAYA1-base), p_skip * x; true, the native layout's (upstream transformers' ZAYA, ZAYA1-8B and later), 0. The
  // native config.json reader sets it; the two agree whenever the skip slot is never chosen.
  bool skip_output_zero = false;
  // Residual merges and LM head (spec §5, §11).
  bool scale_residual_merge = true;  // false: no ResidualScaling tensors, every merge is a plain sum h + res
  bool tie_word_embeddings = true;   // false: an own lm_head.weight [V, D] instead of the embedding
  // Norms.
  double norm_eps = 1e-5;         // norm_epsilon
  double router_norm_eps = 1e-6;  // the zaya-branch reference's fallback (spec §8.2)
  // Special token ids (Gemma 3 layout, spec §7).
  int64_t pad_token_id = 0, eos_token_id = 1, bos_token_id = 2;
  // config.json's eos_token_id when it is a list (chat models add <end_of_turn>): every id a generator stops on,
  // the first being eos_token_id. Empty: eos_token_id alone.
  std::vector<int64_t> eos_token_ids;

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
  // Sliding-window attention per block: is block b sliding, its window (0: full), its RoPE base.
  bool is_sliding(int64_t block) const;
  int64_t window_of(int64_t block) const { return is_sliding(block) ? sliding_window : 0; }
  double rope_theta_of(int64_t block) const { return is_sliding(block) ? sliding_rope_theta : rope_theta; }
  bool has_sliding() const { return sliding_window > 0 && !sliding_blocks.empty(); }
  // The ids generation stops on: eos_token_ids, or eos_token_id alone.
  std::vector<int64_t> stop_token_ids() const;
  // Zyphra's `zaya`-branch modeling code derives the query latent as hidden / 2 from num_attention_heads
  // (spec §11): a model loads there as-is only when q_heads * head_dim == hidden / 2 (docs/formats.md).
  bool fits_zaya_branch() const { return 2 * q_width() == hidden; }

  // Throws zaya::Error naming `source` (a file or "preset X") and the bad field.
  void validate(const std::string& source) const;
};

// The sliding blocks in words: "every even block (0, 2, ..., 58)", "every block" or "blocks 1, 3".
std::string describe_sliding_blocks(const ZayaConfig& config);

// What a user should know when `config` cannot load in the `zaya`-branch reference (empty when it can).
std::string zaya_branch_note(const ZayaConfig& config);

// The architecture fields where `a` and `b` differ, each as "key: A vs B" in the [model] keys of a training
// config (docs/training.md); token ids are not compared. Empty: the same model.
std::vector<std::string> model_differences(const ZayaConfig& a, const ZayaConfig& b);

// Named presets: "tiny", "small", "zaya1-base", "zaya1-8b", "zaya1-74b".
ZayaConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// The blocks a `sliding_blocks` pattern names: "even" (0, 2, 4, ...: the 74B's pattern), "all", or "none".
// Throws naming `source` and the allowed values.
std::vector<int64_t> sliding_block_pattern(const std::string& pattern, int64_t num_blocks, const std::string& source);

}  // namespace zaya
