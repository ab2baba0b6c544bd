#pragma once
// The whole ZAYA1 model in the legacy 80-half-layer layout (spec §5):
//
//   h = embed[ids]
//   for n in 0..2L-1:  res = merge_n(h, res)  (residual scaling; n = 0 has no residual term)
//                      x = RMSNorm_n(res);  h = CCA(x) if n even else MoE(x, r_prev)
//   res = merge_final(h, res);  logits = RMSNorm_final(res) embed^T   (tied head)
//
// ZayaModel owns parameters and buffers; ModelWorkspace owns everything sized
// by the batch (activations kept for backward, backward scratch), allocated
// once so the step loop allocates nothing.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/model/attention_block.h"
#include "zaya/model/config.h"
#include "zaya/model/context_parallel.h"
#include "zaya/model/frozen_base.h"
#include "zaya/model/lora.h"
#include "zaya/model/moe_block.h"
#include "zaya/model/params.h"
#include "zaya/model/recompute.h"
#include "zaya/model/weights.h"
#include "zaya/ops/attention.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/cca_conv.h"
#include "zaya/ops/quant_linear.h"
#include "zaya/ops/rope.h"

namespace zaya {

// Where the parameters live. kF32: one float32 arena (the master weights),
// with a bf16 copy after enable_bf16_gemms(). kFrozenBf16: a frozen base in
// bf16 (model/frozen_base.h): the large matrices only in the bf16 arena, the
// small tensors float32 beside their bf16 copy; for LoRA with bf16 GEMMs. The
// parameters then change only through init(), set_param() and
// set_param_bf16(), one tensor at a time.
enum class ParamStorage : uint8_t { kF32, kFrozenBf16 };

// How a frozen LoRA base holds the routed experts' fc1 and fc2 (docs/training.md "LoRA over a quantized base",
// [lora] base_dtype): as the storage says (kF32, the default), or only as packed rows of kMXFP4, kFP8 or kI8
// (ops/quant_linear.h), under either storage; their float32 views then have no memory.

class ZayaModel {
 public:
  // experts: the experts this rank holds (expert parallelism); default all.
  explicit ZayaModel(const ZayaConfig& config, ExpertRange experts = {}, ParamStorage storage = ParamStorage::kF32,
                     WeightType expert_type = WeightType::kF32);
  ZayaModel(const ZayaModel&) = delete;
  ZayaModel& operator=(const ZayaModel&) = delete;

  // Random initialisation (spec §10, docs/model.md) and initial buffers
  // (kFrozenBf16: tensor by tensor, the bf16-only ones rounded to bf16).
  void init(uint64_t seed);
  ParamStorage storage() const { return bf16_frozen_ ? ParamStorage::kFrozenBf16 : ParamStorage::kF32; }
  // The routed experts' packed type (kF32: not quantized).
  WeightType expert_type() const { return quant_.type; }
  // The quantized experts for ops/quant_linear.h (null when not quantized).
  const QuantWeights* quant_weights() const { return quant_.type != WeightType::kF32 ? &quant_ : nullptr; }
  // Whether parameter e is held as packed rows of `type`: set_param_packed then takes its rows as they are.
  bool holds_packed(const ParamEntry& e, WeightType type) const;
  // Writes a quantized parameter's rows (e.shape[0] rows of weight_row_bytes(expert_type(), e.shape[1]) bytes).
  void set_param_packed(const ParamEntry& e, const uint8_t* rows);
  // Writes parameter `e` (an entry of params()) from numel float32 values
  // (rounded to bf16 where only bf16 is held), or from numel bf16 values (raw
  // bits; widened exactly where float32 is held). Under kFrozenBf16 the bf16
  // copy of a float32 tensor is written too; under kF32 the owner refreshes
  // it (refresh_bf16_weights) as after any change.
  void set_param(const ParamEntry& e, const float* values);
  void set_param_bf16(const ParamEntry& e, const uint16_t* bits);
  // Parameter `e` as numel float32 values (widened from bf16 where only bf16 is held).
  void read_param(const ParamEntry& e, float* out) const;
  // Bytes of parameter memory: the float32 arena (kFrozenBf16: its backed
  // pages, the float32-held tensors only) and the bf16 arena (0 without one;
  // without the quantized experts' ranges, which are never written).
  int64_t f32_param_bytes() const;
  int64_t bf16_param_bytes() const;
  // Bytes of the quantized experts' rows (0 when not quantized).
  int64_t quant_param_bytes() const { return quant_bytes_; }

  const ZayaConfig& config() const { return config_; }
  const ParamTable& params() const { return params_; }
  const ParamTable& buffers() const { return buffers_; }
  // The float32 arena laid out by params(). Under kFrozenBf16 the bf16-only
  // tensors' ranges of it are views without memory (reading them faults): use
  // read_param / set_param for whole tensors.
  float* param_data() { return frozen_ ? frozen_->data() : param_arena_.data(); }
  const float* param_data() const { return frozen_ ? frozen_->data() : param_arena_.data(); }
  float* buffer_data() { return buffer_arena_.data(); }
  const float* buffer_data() const { return buffer_arena_.data(); }
  const ModelWeights& weights() const { return weights_; }
  // Balancing biases of each MoE half-layer ([N] each).
  const std::vector<float*>& balancing_biases() const { return biases_; }

  // Mixed precision (train.precision = "bf16", docs/model.md "Precision"):
  // keep a bf16 copy of every parameter, used by the forward and backward
  // linear layers; the float32 parameters stay the master weights. The copy
  // is taken now and by every refresh_bf16_weights() (the owner calls it
  // after each change of the parameters: once per optimizer update). Under
  // kFrozenBf16 the bf16 arena exists from the start; these refresh the copy
  // of the float32-held tensors only.
  void enable_bf16_gemms();
  void refresh_bf16_weights();
  // The bf16 copy, or null when the model runs float32 GEMMs.
  const Bf16Weights* bf16_weights() const { return bf16_arena_ ? &bf16_ : nullptr; }
  // The bf16 copy itself, for a ZeRO-1 bf16 all-gather that fills it (null before enable_bf16_gemms).
  uint16_t* bf16_weight_data() { return bf16_arena_.get(); }

  // LoRA (model/lora.h): the adapters the forward and backward passes add
  // to their targets (attention projections, router matrices, experts),
  // unmerged (null: none). Borrowed: they must outlive their use here.
  void set_lora(const LoraAdapters* adapters) { lora_ = adapters; }
  const LoraAdapters* lora() const { return lora_; }

 private:
  ZayaConfig config_;
  ParamTable params_;
  ParamTable buffers_;
  Arena param_arena_;
  std::unique_ptr<FrozenF32Space> frozen_;  // kFrozenBf16 or quantized experts: the float32 arena's address space
  bool bf16_frozen_ = false;                // kFrozenBf16
  QuantWeights quant_;                      // the quantized experts (type kF32: none)
  AlignedPtr<uint8_t> quant_arena_;
  int64_t quant_bytes_ = 0;
  // Whether parameter e has no float32 memory (bf16-only or quantized).
  bool f32_absent(const ParamEntry& e) const;
  bool quantized(const ParamEntry& e) const;
  Arena buffer_arena_;
  ModelWeights weights_;
  std::vector<float*> biases_;
  AlignedPtr<uint16_t> bf16_arena_;
  Bf16Weights bf16_;
  const LoraAdapters* lora_ = nullptr;
};

// Loss of one forward pass, with its parts.
struct LossParts {
  double xent_sum = 0;      // sum of token cross-entropies over positions with a target
  int64_t xent_tokens = 0;  // number of such positions
  double router_loss = 0;   // sum over MoE layers of Switch aux + z losses (0 if disabled)
  double xent_mean() const { return xent_tokens > 0 ? xent_sum / double(xent_tokens) : 0.0; }
};

// Mixed precision (docs/model.md "Precision"): the activations that only
// GEMMs read, kept for the backward as the bf16 rounding those GEMMs read.
struct Bf16KeptInputs {
  bool attention = false;  // each attention block's normed input (model/attention_block.h)
  bool experts = false;    // the experts' routed rows and SwiGLU output (model/moe_experts.h)
  bool any() const { return attention || experts; }
};

// What a run with bf16 GEMMs keeps in bf16: every such input but those its
// LoRA adapters (null: none) read in float32.
Bf16KeptInputs bf16_kept_inputs(const LoraConfig* lora);

struct HeadGradient;  // below, with model_forward

class ModelWorkspace {
 public:
  // Capacity: up to max_batch sequences of up to max_seq tokens. training = false
  // skips the backward scratch. ep: the expert-parallel group when the model's
  // experts are spread over ranks (null: this rank holds all of them). cp: the
  // context-parallel group sharing the same sequences (null: whole sequences
  // here); each of its ranks then holds max_seq / cp tokens of every sequence
  // (model/context_parallel.h). A group of one rank runs the same exchanges
  // with itself (tests). recompute: which blocks keep one shared set of
  // activations, recomputed by model_backward (model/recompute.h); the
  // gradients are bitwise those of Recompute::kNone. kept: the inputs that
  // only GEMMs read kept as their bf16 rounding alone (Bf16KeptInputs) where
  // each layer keeps its own (not for a recomputed block kind, where the one
  // shared set would cost more than it saves); every pass must then run the
  // model with bf16 GEMMs (ZayaModel::enable_bf16_gemms), and LoRA adapters
  // must not read those inputs. The results are the same bits.
  //
  // loss_chunk (train.loss_chunk, docs/training.md): 0 keeps the logits of
  // every row [rows, V] (logits() reads them); n > 0 runs the LM head and the
  // cross-entropy n rows at a time and keeps only one piece of logits [n, V],
  // so a large vocabulary costs n instead of rows logit rows. Such a forward
  // needs targets, and a training forward forms the head's gradient while each
  // piece exists (HeadGradient, model_forward).
  ModelWorkspace(const ZayaConfig& config, int64_t max_batch, int64_t max_seq, bool training, Comm* ep = nullptr,
                 Comm* cp = nullptr, Recompute recompute = Recompute::kNone, Bf16KeptInputs kept = {},
                 int64_t loss_chunk = 0);

  int64_t max_batch() const { return max_batch_; }
  int64_t max_seq() const { return max_seq_; }
  // Context-parallel ranks (1: none).
  int cp_size() const { return cp_comm_ != nullptr ? cp_comm_->size() : 1; }
  // Rows of the last forward: B * S, or B * S / cp under context parallelism
  // (this rank's chunks, in the order of model/context_parallel.h).
  int64_t rows() const { return shape_.tokens(); }
  // Logits of the last forward [rows, V]; after a float32 backward they hold dlogits (bf16 GEMMs leave them).
  // Not with a loss_chunk, which keeps no whole logits.
  float* logits();
  const float* logits() const { return const_cast<ModelWorkspace*>(this)->logits(); }
  // Rows of logits the LM head forms at a time (0: every row at once).
  int64_t loss_chunk() const { return loss_chunk_; }
  // Per-token cross-entropy of the last forward [rows] (0 where there was no target).
  const float* token_loss() const { return loss_T_; }
  // Per-token weights of the next model_backward's cross-entropy term: row t's
  // gradient is xent_scale * w_T[t] * (softmax - onehot) (a policy-gradient
  // loss, rl/grpo.h); w_T has rows() entries and must outlive that backward.
  // Null (the default): every row weighs 1, the same bits as before. Not with
  // a loss_chunk (its forward forms the head's gradient).
  void set_token_weights(const float* w_T) { token_weights_ = w_T; }
  // Routing replay (RL, docs/rl.md "Routing replay"): the expert choices a decoder made for the rows of the next
  // passes, [MoE layers, rows(), top_k] (MoE layer l is block l's), kNotRecorded on every entry of a row without a
  // record (ops/routing.h). Each MoE layer's forward (and a recomputed one) compares its router's choices with them,
  // counting into routing()[l].replay_*; with force it routes by them, gates from its own router (RoutingReplay).
  // The array must outlive the passes' backward. Null (the default): none. Needs whole sequences (no cp).
  void set_routing_record(const int32_t* choices_LTJ, bool force);
  std::vector<RoutingStats>& routing() { return routing_; }
  // Seconds spent in expert-parallel all-to-all exchanges since the last reset_routing().
  double exchange_seconds() const { return moe_scratch_.experts.exchange_seconds; }
  void reset_routing();
  Recompute recompute() const { return recompute_; }
  // Bytes of the whole workspace: the activations kept for backward (with
  // the one shared set of recomputed ones), then the scratch.
  int64_t bytes() const;
  int64_t activation_bytes() const;
  // Sizes the scratch of this workspace's Bf16Context (ops/precision.h) for
  // its largest operands, so a bf16 step loop allocates nothing.
  void reserve_bf16_gemms();
  // The precision of a pass of `model` in this workspace: bf16 GEMMs with
  // this workspace's Bf16Context over the model's bf16 copy when it has one
  // (ZayaModel::enable_bf16_gemms), else float32; a quantized base's experts
  // over their packed rows (ZayaModel::quant_weights) in either.
  Precision precision_for(const ZayaModel& model);
  // Buffers for running a model with LoRA adapters of this rank and these
  // targets (kept adapter inputs, scratch); needed before a forward of such a model.
  void enable_lora(const ZayaConfig& config, const LoraConfig& lora);
  // LoRA dropout of the following forward passes (and their backward): on
  // with the mask of (seed, pass) (ops/lora_linear.h), or off (evaluation).
  // The caller gives every pass of a run its own number (step, micro-batch, rank).
  void set_lora_dropout(bool on, uint64_t seed = 0, uint64_t pass = 0);

 private:
  friend LossParts model_forward(const ZayaModel&, ModelWorkspace&, const int32_t*, const int32_t*, int64_t, int64_t,
                                 const MoeLossOptions&, const int32_t*, const HeadGradient*);
  friend void model_backward(const ZayaModel&, ModelWorkspace&, const ModelWeights&, float, float,
                             const MoeLossOptions&, const std::function<void(int)>*, const LoraViews*);
  // The activations of attention block b / MoE block l: their own, or the
  // shared set when that block kind is recomputed (whose EDA router state
  // then points at layer l's own, kept for the next layer).
  AttentionActs& attn_acts(int64_t b) { return attn_[attn_.size() == 1 ? 0 : size_t(b)]; }
  MoeActs& moe_acts(int64_t l);
  const float* moe_router_state(int64_t l) const;
  // model_forward's steps (model/model_forward.cc): its checks; this rank's
  // rows of the batch (ids, targets, positions; the chunks of each sequence
  // under context parallelism) and the pass's shape; the blocks' LoRA
  // adapters and dropout stream; the block of half-layer n (attention when
  // n is even, else MoE), counting its routing into `stats` and returning
  // its router losses; the LM head and the loss into `parts`.
  void check_pass(const ZayaModel& model, int64_t batch, int64_t seq, bool has_targets, const HeadGradient* head) const;
  void stage_batch(const ZayaConfig& config, const int32_t* ids_BS, const int32_t* targets_BS,
                   const int32_t* doc_pos_BS, int64_t batch, int64_t seq);
  void bind_lora_pass(const ZayaModel& model);
  double block_forward(const ZayaModel& model, const Precision& precision, int64_t n, const MoeLossOptions& loss,
                       RoutingStats& stats);
  void lm_head_forward(const ZayaModel& model, const Precision& precision, bool has_targets, const HeadGradient* head,
                       LossParts& parts);
  // Before the backward of half-layer k: its forward again when it is
  // recomputed (no routing statistics, no losses counted).
  void recompute_half_layer(const ZayaModel& model, const Precision& precision, int64_t k, const MoeLossOptions& loss);
  int64_t max_batch_, max_seq_;
  bool training_;
  Recompute recompute_ = Recompute::kNone;
  Bf16KeptInputs kept_;
  int64_t loss_chunk_ = 0;                            // rows of logits at a time (0: all)
  int64_t bf16_a_ = 0, bf16_b_ = 0, bf16_width_ = 0;  // reserve_bf16_gemms' sizes
  AttentionShape bf16_attention_;                     // and the bf16 attention core's and conv B's scratch
  CcaConvShape bf16_conv_;
  Bf16Context bf16_;    // the scratch and GEMM primitives of bf16 passes in this workspace
  QuantContext quant_;  // the dequantized tiles of a quantized base's experts (ops/quant_linear.h)
  Comm* ep_ = nullptr;
  Comm* cp_comm_ = nullptr;
  ContextParallel cp_;
  BatchShape shape_;
  RopeTable rope_;
  RopeTable sliding_rope_;  // built only when the config has sliding-window blocks
  std::vector<int32_t> pos_T_;
  std::vector<int32_t> doc_pos_T_;  // document masking: this rank's rows of doc_pos_BS
  std::vector<int32_t> targets_T_;
  std::vector<int32_t> ids_T_;
  Arena acts_, scratch_;
  float* embed_out_TD_ = nullptr;
  std::vector<float*> res_TD_;  // residual at each half-layer's input, then the final merge [2L + 1]
  std::vector<float*> x_TD_;    // normed inputs [2L + 1] (last = final norm output)
  std::vector<float*> rstd_T_;  // [2L + 1]
  std::vector<float*> out_TD_;  // block outputs [2L]
  std::vector<AttentionActs> attn_;
  std::vector<MoeActs> moe_;
  std::vector<float*> moe_r_TR_;  // recomputed MoE blocks under EDA: each layer's router state r [L]
  std::vector<RoutingStats> routing_;
  RoutingStats recompute_stats_;  // what a recomputed MoE forward counts (discarded)
  float* logits_TV_ = nullptr;    // [rows, V], or [loss_chunk, V]
  // A chunked forward's head gradient, for model_backward: which arena and scale it used; dx_TD_ holds its dx.
  bool head_grad_done_ = false;
  const float* head_grad_dw_ = nullptr;
  float head_grad_scale_ = 0;
  float* loss_T_ = nullptr;
  float* lse_T_ = nullptr;
  const float* token_weights_ = nullptr;     // set_token_weights
  const int32_t* routing_record_ = nullptr;  // set_routing_record
  bool routing_force_ = false;
  AttentionScratch attn_scratch_;
  MoeScratch moe_scratch_;
  float* dres_a_TD_ = nullptr;
  float* dres_b_TD_ = nullptr;
  float* dh_TD_ = nullptr;
  float* dx_TD_ = nullptr;
  Arena lora_arena_;
  int64_t lora_rank_ = 0;                 // rank the LoRA buffers were sized for (0: none)
  std::vector<LoraTarget> lora_targets_;  // ... and targets
  std::vector<BlockLora> lora_;           // per block (both half-layers), filled by each forward
  bool lora_dropout_ = false;
  uint64_t lora_seed_ = 0, lora_pass_ = 0;
};

// What a forward in a workspace with a loss_chunk forms of the backward: the
// LM head's part, while each piece of logits exists (docs/training.md,
// `loss_chunk`). dw_VD: the head's gradient, added to (the embedding's when
// tied; null when frozen); xent_scale: as model_backward's, which must get
// the same scale and gradient arena.
struct HeadGradient {
  float* dw_VD = nullptr;
  float xent_scale = 0;
};

// Forward pass over ids_BS (B sequences of S tokens); targets_BS may be null
// (no loss) and entries < 0 are ignored. Logits stay in ws.logits(). Under
// context parallelism every rank of the cp group passes the same whole
// sequences and computes its own chunks (logits, losses: those rows only).
// doc_pos_BS (document masking, model/batch.h): each token's position inside
// its document, 0 at every document start and +1 along it; null for none.
// A window packing several documents then gives each of them the logits and
// gradients it would have alone (positions restart at 0).
// head: only for a workspace with a loss_chunk, in a pass that model_backward
// follows: that backward's head gradient, formed here (HeadGradient). A
// chunked forward without it (evaluation) computes the loss alone.
LossParts model_forward(const ZayaModel& model, ModelWorkspace& ws, const int32_t* ids_BS, const int32_t* targets_BS,
                        int64_t batch, int64_t seq, const MoeLossOptions& loss, const int32_t* doc_pos_BS = nullptr,
                        const HeadGradient* head = nullptr);

// Backward of the last forward. Adds into `grads` (a ModelWeights bound to a
// gradient arena; its null views are frozen tensors, model/weights.h, whose weight
// gradients are skipped: only the input gradients are formed) the gradient of
//   xent_scale * sum of token cross-entropies + router_scale * router losses.
// For the mean over N target tokens of a global batch, xent_scale = 1/N.
// layer_done, when given, is called with n as soon as every parameter gradient
// of half-layer n is final (for overlapping their reduction with the rest).
// lora_grads: where the gradients of the model's LoRA adapters are added
// (LoraAdapters::bind of a gradient arena); required when the model has adapters.
void model_backward(const ZayaModel& model, ModelWorkspace& ws, const ModelWeights& grads, float xent_scale,
                    float router_scale, const MoeLossOptions& loss,
                    const std::function<void(int)>* layer_done = nullptr, const LoraViews* lora_grads = nullptr);

// Forward FLOPs (GEMMs + causal attention, sliding blocks counting only the
// keys in their window) of B*S tokens whose MoE layers sent `routed_rows` rows
// to experts in total (summed over layers), used for MFU.
double model_forward_flops(const ZayaConfig& config, int64_t batch, int64_t seq, double routed_rows);

}  // namespace zaya
