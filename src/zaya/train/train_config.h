#pragma once
// The training job's configuration, read from TOML (configs/*.toml). One
// struct per component, each key validated in one place: an unknown key, a
// wrong type or an out-of-range value is reported with the file, the key, the
// value and what is allowed.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/core/enum_names.h"
#include "zaya/formats/model_directory.h"
#include "zaya/model/config.h"
#include "zaya/model/lora.h"
#include "zaya/model/moe_block.h"
#include "zaya/model/recompute.h"
#include "zaya/optim/balance.h"
#include "zaya/optim/optimizer.h"
#include "zaya/optim/schedule.h"
#include "zaya/train/recipe.h"
#include "zaya/train/rl_config.h"

namespace zaya {

struct DataConfig {
  std::string dir;        // holds train.{bin,idx} and val.{bin,idx} (zaya data shards)
  std::string tokenizer;  // SentencePiece model used to build them (copied next to the weights)
  // Dataset prefixes (PREFIX.bin + PREFIX.idx, zaya shards or a Megatron
  // indexed dataset, told apart by the index's magic); default DIR/train, DIR/val.
  std::string train;
  std::string val;
  // Document masking (docs/training.md): no token sees across a document
  // boundary inside a training window (attention, CCA convolutions, value
  // shift), and RoPE positions restart at every document.
  bool document_masking = false;
};

// train.precision: the GEMM operands of the forward and backward.
enum class GemmPrecision { kF32, kBF16, kAuto };
inline constexpr EnumName<GemmPrecision> kGemmPrecisionNames[] = {
    {GemmPrecision::kF32, "f32"}, {GemmPrecision::kBF16, "bf16"}, {GemmPrecision::kAuto, "auto"}};

// train.save_dtype (the final weights) and parallel.zero_gather_dtype (the ZeRO-1 parameter all-gather).
enum class ValueDtype { kF32, kBF16 };
inline constexpr EnumName<ValueDtype> kValueDtypeNames[] = {{ValueDtype::kF32, "f32"}, {ValueDtype::kBF16, "bf16"}};

// ft.on_save_error: what a failed checkpoint save does.
enum class OnSaveError { kContinue, kStop };
inline constexpr EnumName<OnSaveError> kOnSaveErrorNames[] = {{OnSaveError::kContinue, "continue"},
                                                              {OnSaveError::kStop, "stop"}};

struct RunConfig {
  uint64_t seed = 1234;
  int64_t micro_batch = 16;  // sequences per forward/backward
  int64_t seq_len = 128;
  int64_t grad_accum = 1;    // micro-batches per optimizer step
  int64_t steps = 1000;      // optimizer steps
  int64_t eval_every = 100;  // steps between validation runs (0: only at the end)
  int64_t eval_batches = 8;  // micro-batches of validation data per run
  int64_t log_every = 10;
  int threads = 0;  // 0: all cores (OMP_NUM_THREADS if set)
  std::string out_dir = "runs/out";
  ValueDtype save_dtype = ValueDtype::kF32;                // weights written at the end: f32 or bf16
  DirectoryLayout save_layout = DirectoryLayout::kLegacy;  // and their layout (formats/model_directory.h)
  // GEMM operands of the forward and backward: "f32", "bf16" (float32 master
  // weights, gradients and optimizer state; docs/model.md "Precision") or
  // "auto" (bf16 where the CPU has native bf16 GEMMs). f32 by default: a
  // config then computes the same numbers on every machine.
  GemmPrecision precision = GemmPrecision::kF32;
  // Activation recomputation (model/recompute.h, docs/training.md): none,
  // attention, moe or full. The gradients are bitwise the same; "none" is the
  // fastest, "full" keeps the least.
  Recompute recompute = Recompute::kNone;
  // Rows of logits the LM head and the cross-entropy form at a time (model/model.h,
  // docs/training.md): 0 keeps all micro_batch x seq_len rows of logits; n > 0
  // keeps n rows, for large vocabularies (ZAYA1-8B's 262,144 columns).
  int64_t loss_chunk = 0;
  int64_t tokens_per_step() const { return micro_batch * seq_len * grad_accum; }
};

// Process layout under mpirun: world = dp x ep x cp (dp = world / (ep * cp)).
struct ParallelConfig {
  int ep = 1;                 // expert-parallel ranks (experts split over them)
  int cp = 1;                 // context-parallel ranks (each sequence split over them, model/context_parallel.h)
  double comm_timeout = 600;  // seconds a collective may wait for a peer before the run fails (0: forever)
  // ZeRO-1 parameter all-gather (dist/zero.h): "f32" replicates the updated
  // float32 shards; "bf16" (bf16 GEMMs only) carries the GEMM weights as bf16
  // straight into the bf16 weight copy, halving their bytes.
  ValueDtype zero_gather_dtype = ValueDtype::kF32;
};

// Checkpoints (docs/checkpoints.md).
struct CheckpointConfig {
  int64_t every = 0;       // steps between checkpoints (0: none during the run)
  bool final = true;       // a checkpoint after the last step
  int keep_last = 3;       // newest checkpoints kept
  int64_t keep_every = 0;  // steps that are multiples of this are kept forever (0: none)
  bool async = true;       // write in the background; the step loop only waits for the snapshot
  std::string dir;         // default: OUT_DIR/checkpoints
};

// Numerical fault handling (docs/fault-tolerance.md).
struct FaultToleranceConfig {
  double spike_z = 6.0;    // skip a step whose loss or gradient norm is this many standard deviations
                           // above the recent window (0: off)
  int spike_warmup = 20;   // accepted steps in the window before spikes are judged
  int rollback_after = 3;  // consecutive skipped steps that trigger a rollback to the last checkpoint (0: off)
  int max_rollbacks = 3;   // rollbacks to the same checkpoint before the run stops with an error
  OnSaveError on_save_error = OnSaveError::kContinue;
  int max_failed_saves = 2;         // with continue: stop after this many failed checkpoint saves in a row (0: never)
  double straggler_ratio = 1.5;     // report a rank whose step time exceeds the fastest rank's by this factor
  std::vector<int64_t> skip_steps;  // steps to skip deliberately (reproducing a run that skipped them)
};

// True when `run.precision` asks for bf16 GEMMs on this CPU ("auto": where they are native).
bool uses_bf16_gemms(const RunConfig& run);

struct TrainConfig {
  std::string source;  // the file it came from, for messages
  std::string model_preset;
  bool vocab_from_tokenizer = true;  // vocab sizes not set explicitly: take the tokenizer's
  ZayaConfig model;
  // model.init_from: a model directory (legacy or native layout, e.g. a run's final/) whose weights a fresh run
  // starts from instead of the random initialisation; its config.json must be `model` (job_start.h).
  std::string init_from;
  DataConfig data;
  RunConfig run;
  OptimizerConfig optim;
  ScheduleConfig schedule;
  BalanceConfig balance;
  MoeLossOptions router_losses;
  ParallelConfig parallel;
  CheckpointConfig checkpoint;
  FaultToleranceConfig ft;
  // [lora] (model/lora.h, docs/training.md "LoRA"): lora.enabled when the section is present.
  LoraConfig lora;
  // [rl] (rl_config.h, docs/rl.md): rl.enabled when the section is present; read by `zaya rl` only.
  RlConfig rl;
  // [[phase]] tables (recipe.h, docs/context-extension.md); empty: one implicit
  // phase from [train], [schedule] and [data]. With phases, run.micro_batch and
  // run.seq_len are the first phase's after parsing, run.steps the sum of the
  // phase steps for one data replica; the trainer plans them for its own layout
  // and sets them, and model.rope_theta, to the current phase's as it goes.
  std::vector<PhaseConfig> phases;
  std::string checkpoint_dir() const;  // checkpoint.dir or OUT_DIR/checkpoints
};

// Loads and validates a TOML file; `overrides` are "section.key=value" strings
// (TOML values) applied on top, as from `zaya train --set train.steps=10`.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Same, from TOML text (tests); `source` names it in messages.
TrainConfig parse_train_config(const std::string& toml_text, const std::string& source,
                               const std::vector<std::string>& overrides = {});

// The configuration as TOML, for the run directory (reproducibility).
std::string train_config_to_toml(const TrainConfig& config);

}  // namespace zaya
