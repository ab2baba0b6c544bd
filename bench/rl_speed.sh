#!/usr/bin/env bash
# `zaya rl`'s throughput beside the decoder's and the trainer's own benchmarks
# on the same shapes (docs/rl.md "Speed"), in one run on one machine:
#   rollout  zaya rl's rollout_tokens_per_s (generated tokens per second of sampling: prefill,
#            decode, stop strings) vs zaya bench infer's decode tokens/s at batch P x G and the
#            prompt's context
#   update   zaya rl's update_tokens_per_s (tokens of the training rows per second of the
#            gradient passes and optimizer step) vs zaya bench train's tokens/s at the same
#            micro_batch, seq_len and grad_accum
# Needs the walk-through's run directory (bench/rl_demo.sh OUT): its warm start and prompts.
#   bench/rl_speed.sh [BUILD_DIR=build] [OUT=runs/rl] [THREADS=2]
set -euo pipefail
build=${1:-build} out=${2:-runs/rl} threads=${3:-2}
zaya=$build/zaya
cfg=configs/rl-tiny.toml
P=$(sed -n 's/^prompts_per_step = //p' $cfg) G=$(sed -n 's/^group_size = //p' $cfg)
micro=$(sed -n 's/^micro_batch = //p' $cfg) seq=$(sed -n 's/^seq_len = //p' $cfg)
accum=$(((P * G + micro - 1) / micro))
rm -rf "$out/speed-run"
"$zaya" rl --config $cfg --quiet --threads "$threads" --set model.init_from="\"$out/sft-run/final\"" \
  --set data.tokenizer="\"$out/tok.model\"" --set rl.prompts="\"$out/prompts.jsonl\"" --set rl.eval_prompts='""' \
  --set train.steps=10 --set checkpoint.final=false --set train.out_dir="\"$out/speed-run\"" >/dev/null
"$zaya" bench infer --model "$out/sft-run/final" --dtype f32 --no-prefill --no-working-set --batch $((P * G)) \
  --context "$seq" --decode-steps 8 --threads "$threads" --json "$out/speed-infer.json" >/dev/null
"$zaya" bench train --preset tiny --set model.num_blocks=2 --micro-batch "$micro" --seq-len "$seq" \
  --grad-accum "$accum" --steps 10 --threads "$threads" --json "$out/speed-train.json" >/dev/null
python3 - "$out" "$P" "$G" "$micro" "$seq" "$accum" <<'PY'
import json, statistics, sys
out, P, G, micro, seq, accum = sys.argv[1], *map(int, sys.argv[2:])
steps = [json.loads(l) for l in open(f"{out}/speed-run/metrics.jsonl")]
steps = [r for r in steps if "rollout_tokens_per_s" in r][2:]  # the first two steps warm up
roll = statistics.median(r["rollout_tokens_per_s"] for r in steps)
upd = statistics.median(r["update_tokens_per_s"] for r in steps)
infer = json.load(open(f"{out}/speed-infer.json"))
train = json.load(open(f"{out}/speed-train.json"))
dec = [d for d in infer.get("decode", []) if d.get("batch") == P * G]
dec_tps = dec[0]["tokens_per_second"] if dec else float("nan")
tr_tps = train["tokens_per_second"]
print(f"rollout: zaya rl {roll:.0f} tok/s vs zaya bench infer decode (batch {P * G}, context {seq}, f32 weights) "
      f"{dec_tps:.0f} tok/s: {roll / dec_tps:.2f}x")
print(f"update:  zaya rl {upd:.0f} tok/s vs zaya bench train ({micro} x {seq} x {accum}) {tr_tps:.0f} tok/s: "
      f"{upd / tr_tps:.2f}x")
PY
