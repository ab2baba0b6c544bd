#pragma once
// The cached decoder: a forward pass over a ragged batch of token chunks, each
// appended to its own sequence ("slot") whose per-layer state persists between
// steps. Prefill (a prompt, or a chunk of one), decode (one token per
// sequence) and any mix of the two (continuous batching) are the same call.
//
// Decode state per attention half-layer and slot (spec §3, "Decode / cache state"):
// K and V live in a paged cache (its pages, tables and reference counts are
// KvPagePool's, kv_page_pool.h; the engine fills and reads them): a pool of
// pages, each holding `page_tokens` positions of every layer of one attention
// kind (full or sliding), [Hk,
// page_tokens, d] per layer for K and for V (keys after QK norm and RoPE;
// values: head 0 the current-token stream, head 1 the delayed one). A slot's
// page table maps page i (positions i*page_tokens ..) to a pool page; the
// attention reads through the table (cached_attention.h: one span per page).
// The pages hold f32, or bf16 (kv_bf16(): half the bytes attention reads per
// step and half the memory per token) where the float matrices are bf16 (also
// beside int8 ones; kv_cache_bf16 in matrix_types.h) and
// bf16_activations is on, as bf16 inference in PyTorch keeps its cache; a
// step's new keys and values are then rounded to bf16 before anything reads
// them, so prefill, decode and a sliding block's in-step keys all see the
// same values. An f32 model, or --exact (bf16_activations off), keeps f32.
// Pages are reference-counted: copy() and prefix snapshots (share(),
// start_from()) reference the full pages of another sequence instead of
// copying them; a page that more than one holder references is never written
// (a sequence writes only positions >= its length, which lie in its last,
// partial page or in new pages, and a partial page is copied, not shared).
// A sliding block of window W (spec §12) keeps only the pages that hold its
// last W - 1 positions: a step's own keys are read from the step's workspace,
// only its last W - 1 are written, and pages that fell out of the window go
// back to the pool. So a sliding block holds O(W) state however long the
// context, and each block applies its own RoPE base (config.rope_theta_of) at
// absolute positions. The pool is sized by `kv_pool_bytes` (0: every slot at
// max_context); a step that needs more pages than are free fails before it
// changes anything (the serving loop reserves pages so that it never does).
// Beside the pages, each slot has a small state (its length, the convolution
// state and the delayed value of every block): DecodeState's (decode_state.h).
// The engine owns the pool and the state and makes no decision: what runs in
// a step is the batch scheduler's (batch_scheduler.h).
//
// Rows of a step are all new tokens of all chunks, concatenated: projections,
// routers, experts and the LM head run as one matrix product over them (a
// matvec kernel for a few rows, a GEMM for many); convolution, the delayed
// value stream and attention walk each chunk against its own slot's state.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/infer/cached_attention.h"
#include "zaya/infer/decode_state.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/kv_page_pool.h"
#include "zaya/infer/linear.h"
#include "zaya/infer/step_lora.h"
#include "zaya/ops/moe_dispatch.h"
#include "zaya/ops/rope.h"

namespace zaya {

struct EngineOptions {
  int64_t max_sequences = 1;      // slots
  int64_t max_context = 0;        // tokens per slot; 0: max_position_embeddings
  int64_t max_step_tokens = 256;  // rows of one step (prefill chunk size)
  // bf16 weights with many rows: bf16 GEMM (AMX) with activations rounded to
  // bf16 (true), or the exact f32-activation kernel (false). See linear.h.
  // On a bf16 or int8 model it also chooses the KV cache's type (bf16 / f32).
  bool bf16_activations = true;
  int64_t page_tokens = 16;   // positions per KV page
  int64_t kv_pool_bytes = 0;  // bytes of KV pages; 0: every slot at max_context
  void validate(const ZayaConfig& config) const;
  bool operator==(const EngineOptions&) const = default;
};

enum class LogitsWanted { kNone, kLast, kAll };

struct StepChunk {
  int32_t slot = 0;
  const int32_t* tokens = nullptr;
  int64_t count = 0;
  LogitsWanted logits = LogitsWanted::kLast;
  // Speculative verification (spec_verify.h): tokens after the first are a
  // draft that keep_draft() may cut back. The slot records the state each
  // position leaves, writes every position's keys (a sliding block too) and
  // defers its sliding-window releases to keep_draft(). A step whose chunks
  // are all speculative or single tokens runs every row through the decode
  // kernels (matvec, per-row attention), so each row's logits have the bits
  // a one-token step would give it.
  bool speculative = false;
  // The LoRA adapter of the chunk's sequence, applied unmerged to its rows
  // only (step_lora.h); null: the model's own (InferModel::lora(), often none).
  // A sequence keeps one adapter from its first chunk to its last: its cache
  // holds what that adapter computed.
  const LoraAdapters* lora = nullptr;
};

// Counters of the last step, for the roofline.
struct StepStats {
  int64_t tokens = 0;
  int64_t expert_loads = 0;  // sum over MoE layers of the distinct experts the step ran
  int64_t kv_bytes = 0;      // KV cache bytes read by attention
  int64_t skip_choices = 0;  // tokens x layers routed to the skip expert
};

class InferenceEngine {
 public:
  InferenceEngine(const InferModel& model, const EngineOptions& options);
  InferenceEngine(const InferenceEngine&) = delete;
  InferenceEngine& operator=(const InferenceEngine&) = delete;

  const ZayaConfig& config() const { return config_; }
  const InferModel& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }
  int64_t max_sequences() const { return options_.max_sequences; }
  int64_t max_context() const { return max_context_; }
  int64_t max_step_tokens() const { return options_.max_step_tokens; }

  // The engine runs `model` from now on: weights of the same architecture
  // (model_differences) and KV cache type, e.g. a trainer's after an update
  // (RL rollouts: rl/rollout.h). Its pool, state and step workspace are kept,
  // so a caller that decodes again and again need not build them (and have the
  // kernel fault their pages in) each time. Every slot must be empty (reset).
  void rebind(const InferModel& model);
  // Whether rebind(model) may be called (slots aside): the architecture and the KV cache type match.
  bool can_rebind(const InferModel& model) const;

  // Tokens held by a slot.
  int64_t length(int32_t slot) const;
  // Empties a slot (state back to zero, its pages released).
  void reset(int32_t slot);
  // dst becomes a copy of src (prefix sharing: score several continuations of
  // one context): it references src's full pages and gets a copy of the
  // partial last one (copy-on-write); fails when no page is free for it.
  void copy(int32_t src, int32_t dst);

  // The paged KV cache (kv_page_pool.h), one pool per attention kind (full, sliding), numbered in the order blocks
  // first use them.
  const KvPagePool& kv_pool() const { return pool_; }
  int64_t page_tokens() const { return options_.page_tokens; }
  int64_t kv_kinds() const { return pool_.kinds(); }
  int64_t pool_pages(int64_t kind) const { return pool_.pages(kind); }
  int64_t free_pages(int64_t kind) const { return pool_.free_pages(kind); }
  int64_t page_refs(int64_t kind, int32_t page) const { return pool_.refs(kind, page); }
  // Pages of each kind a slot references now.
  std::vector<int64_t> pages_held(int32_t slot) const;
  // The most pages of each kind one sequence holds at once while it grows to `length` tokens (any chunking).
  std::vector<int64_t> max_pages(int64_t length) const { return pool_.max_pages(length); }
  // New pages of each kind step(chunks) would take from the pool.
  std::vector<int64_t> pages_needed(std::span<const StepChunk> chunks) const;
  // Bytes of one page of each kind, and of the per-sequence state beside the pages (conv state, delayed value).
  int64_t page_bytes(int64_t kind) const { return pool_.page_bytes(kind); }
  // Whether the KV pages hold bf16 (else f32); see the top of this file.
  bool kv_bf16() const { return pool_.elem_bytes() == 2; }
  int64_t small_state_bytes() const;

  // A snapshot of a sequence after `length` tokens (a multiple of page_tokens):
  // references to its pages and a copy of the small per-sequence state.
  using Snapshot = SequenceSnapshot;
  // The slot's state as a snapshot (its pages' reference counts + 1).
  Snapshot share(int32_t slot);
  // The slot (reset first) continues from the snapshot: it references the snapshot's pages.
  void start_from(const Snapshot& snapshot, int32_t slot);
  // Drops the snapshot's references (pages nothing else references go back to the pool).
  void release(Snapshot& snapshot);

  // One forward pass over the chunks (distinct slots, at most max_step_tokens
  // tokens in all); each chunk's tokens are appended to its slot.
  void step(std::span<const StepChunk> chunks);

  // After a step whose chunk for `slot` was speculative: the slot keeps its
  // first `length` tokens (from its length before that step to its length
  // after it) exactly as if only they had been fed: the pages wholly past
  // them go back to the pool, the convolution state and delayed value are
  // those after position length - 1, the sliding pages out of the window are
  // released. Required before the slot's next step.
  void keep_draft(int32_t slot, int64_t length);
  // Draft tokens a speculative chunk can check after the slot's pending token
  // (room in the context, and a chunk shorter than every sliding window).
  int64_t draft_room(int32_t slot) const {
    int64_t room = max_context_ - length(slot) - 1;
    for (int64_t k = 0; k < pool_.kinds(); ++k)
      if (pool_.window(k) > 0) room = std::min(room, pool_.window(k) - 2);
    return room;
  }
  // Whether the slot holds a speculative chunk not yet settled by keep_draft().
  bool drafting(int32_t slot) const { return state_.drafting(slot); }

  // Rows of the last step that asked for logits: chunks in order, tokens in order.
  int64_t logit_rows() const { return int64_t(rows_.logit_rows.size()); }
  // Chunk index and sequence position of logit row r.
  int32_t logit_row_chunk(int64_t r) const { return rows_.logit_chunk[r]; }
  int64_t logit_row_position(int64_t r) const { return rows_.logit_pos[r]; }
  // Logits of logit rows [r0, r1) over the whole (padded) vocabulary into out_TV
  // ([r1 - r0, vocab_size]); the caller masks padding ids.
  void logits(int64_t r0, int64_t r1, float* out_TV);

  const StepStats& last_stats() const { return stats_; }
  // The slots the router of MoE block b chose for each row of the last step, [rows, top_k] in step order (a slot,
  // or kNoExpert after the skip slot; ops/routing.h): RL routing replay records them (docs/rl.md).
  const int32_t* step_choices(int64_t block) const {
    return choice_TJ_.data() + block * options_.max_step_tokens * config_.top_k;
  }

  // Benchmarks: make `slot` hold `length` tokens of synthetic state (cache
  // filled with deterministic pseudo-random values), without a prefill.
  void fill_synthetic(int32_t slot, int64_t length, uint64_t seed);

  // Bytes of decode state per slot at full context (a sliding block's pages
  // counted at their most, max_pages), and of the step workspace.
  int64_t state_bytes_per_slot() const;
  int64_t workspace_bytes() const;

 private:
  // The element-wise ops open a parallel region per call; a decode step's few
  // thousand floats are not worth one (ops/serial_if.h): small steps run them
  // on the calling thread.
  static constexpr int64_t kSerialElements = 32768;

  void attention_layer(int64_t block, int64_t T, std::span<const StepChunk> chunks);
  void moe_layer(int64_t block, int64_t T, const float* r_prev, float* r_out);
  void attend(int64_t block, std::span<const StepChunk> chunks);
  void append_to_cache(int64_t block, std::span<const StepChunk> chunks);
  // Writes n floats as the cache's element type at element `at` of a page.
  void store_kv(char* page, int64_t at, const float* src, int64_t n);

  const InferModel* model_;  // rebind() replaces it
  ZayaConfig config_;
  EngineOptions options_;
  int64_t slots_, max_context_, kw_, cc_, pw_;
  RopeTable rope_;          // full-attention blocks' base (rope_theta)
  RopeTable rope_sliding_;  // sliding blocks' base (sliding_rope_theta), built when some block slides
  LinearRunner linear_;
  KvPagePool pool_;    // the pages and every slot's page tables
  DecodeState state_;  // every slot's length, conv state and delayed value

  // The step's buffers, carved from ws_ for max_step_tokens rows.
  struct StepBuffers {
    float *h_TD = nullptr, *res_a_TD = nullptr, *res_b_TD = nullptr, *x_TD = nullptr, *rstd_T = nullptr;
    float *qkv_TP = nullptr, *a_ext = nullptr, *xg_T2d = nullptr, *c_TC = nullptr;
    float *q_TQ = nullptr, *k_TK = nullptr, *v_TK = nullptr, *inv_q = nullptr, *inv_k = nullptr;
    float *o_TQ = nullptr, *attn_scratch = nullptr;
    float *r_a_TR = nullptr, *r_b_TR = nullptr, *rn_TR = nullptr, *u_TR = nullptr, *g_TR = nullptr;
    float *logits_TN = nullptr, *probs_TN = nullptr, *gate_TJ = nullptr;
    float *xp_MD = nullptr, *h_M2F = nullptr, *act_MF = nullptr, *y_MD = nullptr, *hid_TD = nullptr;
  };
  // Where each row of the step comes from and goes to.
  struct StepRows {
    std::vector<int32_t> row_pos;     // position of each row in its sequence
    std::vector<int32_t> row_chunk;   // chunk of each row
    std::vector<int32_t> a_chunk;     // chunk of each conv-A row (a chunk of S rows has S + cca_time1 - 1)
    std::vector<int64_t> chunk_row0;  // first row of each chunk
    std::vector<int64_t> chunk_past;  // slot length before the step
    std::vector<int64_t> logit_rows;  // rows that want logits, and their chunk and position
    std::vector<int32_t> logit_chunk;
    std::vector<int64_t> logit_pos;
  };
  Arena ws_;
  StepBuffers buf_;
  StepRows rows_;
  int64_t attn_scratch_per_thread_ = 0;
  int threads_ = 1;         // OpenMP threads the attention scratch is sized for
  std::vector<char> seen_;  // per-step scratch, reused
  std::vector<int32_t> ids_;
  std::vector<CachedAttentionChunk> attn_work_;
  std::vector<CachedKeySpan> attn_spans_;
  std::vector<size_t> attn_first_span_;
  std::vector<int32_t> choice_TJ_;  // [blocks, max_step_tokens, top_k]
  ExpertPlan plan_;
  std::vector<LinearRunner::Product> expert_products_;  // moe_layer's products, reused
  StepLora lora_;                                       // the step's rows grouped by adapter
  StepStats stats_;
};

}  // namespace zaya
