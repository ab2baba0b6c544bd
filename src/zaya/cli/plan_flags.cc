#include "zaya/cli/plan_flags.h"

namespace zaya::cli {

void add_plan_common_options(CLI::App& cmd, PlanCommonOptions& o) {
  cmd.add_option("--profile", o.profile, "hardware profile: mi300x-pollara, h100, h200 or a profile JSON")
      ->capture_default_str();
  cmd.add_option("--model", o.model,
                 "preset (tiny, small, zaya1-base, zaya1-8b, zaya1-74b), config.json or model directory")
      ->capture_default_str();
  cmd.add_option("--gemm-table", o.gemm_tables, "`zaya bench gemm --json` files to take GEMM times from first");
  cmd.add_option("--world", o.world, "devices (ranks) = dp x ep x cp")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd.add_option("--ep", o.ep, "expert-parallel ranks")->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  cmd.add_option("--cp", o.cp, "context-parallel ranks (each sequence split over them)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  cmd.add_option("--micro-batch", o.micro_batch, "sequences per micro-batch per device (default 1 on GPUs, 8 on CPUs)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd.add_option("--seq-len", o.seq_len, "tokens per sequence (default 4096 on GPUs, 256 on CPUs)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd.add_option("--grad-accum", o.grad_accum, "micro-batches per step (default 1)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd.add_option("--global-batch", o.global_batch, "sequences per step over all devices (sets --grad-accum)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd.add_option("--dtype", o.dtype,
                 "GEMM dtype of training: f32 or bf16 (default bf16 on GPUs, "
                 "f32 on CPUs)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd.add_option("--ns-dtype", o.ns_dtype, "Muon Newton-Schulz GEMM dtype: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd.add_option("--grad-dtype", o.grad_dtype, "dtype of the gradient reduce-scatter: f32 or bf16 (default: --dtype)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd.add_option("--loss-chunk", o.loss_chunk, "rows of logits formed at a time (train.loss_chunk; 0: all)");
  cmd.add_option("--recompute", o.recompute, "activation recomputation (train.recompute): none, attention, moe, full")
      ->check(CLI::IsMember({"none", "attention", "moe", "full"}));
  cmd.add_flag("!--no-muon", o.muon, "AdamW on every tensor (no Newton-Schulz)");
  cmd.add_option("--ns-steps", o.ns_steps, "Newton-Schulz steps")->check(CLI::Range(1, 20));
  cmd.add_option("--skip-fraction", o.skip_fraction, "share of routed tokens that take the skip expert")
      ->check(CLI::Range(0.0, 0.99));
  cmd.add_option("--overlap", o.overlap,
                 "hide the gradient reduce-scatter behind backward: auto "
                 "(GPUs), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

}  // namespace zaya::cli
