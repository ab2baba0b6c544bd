#!/usr/bin/env bash
# `zaya rl`'s throughput beside the decoder's and the trainer's own benchmarks
# on the same shapes (docs/rl.md "Speed"), in one run on one machine:
#   rollout  zaya rl's rollout_tokens_per_s (generated tokens per second of the whole
#            rollout: prefill, decode, sampling, log-probabilities, stop strings) against
#            1. zaya bench infer's decode tokens/s at batch P x G and context seq_len (decode
#               steps alone: synthetic caches, no prefill, no sampling);
#            2. the same work at bench infer's rates (like for like): the step's prompt
#               tokens at bench infer's prefill tokens/s (one 256-token sequence in one
#               256-token step, the rollout's step budget) plus its generated tokens at the
#               decode tokens/s of 1.: once with every sample's prompt (P x G prompts, what a
#               build without prompt sharing prefills), once with the tokens this build
#               prefilled (rollout_prompt_tokens: each distinct prompt once when the G
#               samples fork from one prefill, infer/generator.h share_prompts);
#            and the rollout's own decode-only steps (rollout_decode_tokens_per_s: steps
#            with no prompt tokens, whose batch shrinks as samples finish) against 1.
#   update   zaya rl's update_tokens_per_s (tokens of the training rows per second of the
#            gradient passes and optimizer step) vs zaya bench train's tokens/s at the same
#            micro_batch, seq_len and grad_accum
# Each figure is the median over ROUNDS rounds (each: 10 RL steps, their first two left
# out, then the benchmarks). With BASE_ZAYA (another build's binary), its rounds alternate
# with this build's and both are printed: on a loaded machine only such side-by-side
# ratios mean anything.
# Needs the walk-through's run directory (bench/rl_demo.sh OUT): its warm start and prompts.
#   bench/rl_speed.sh [BUILD_DIR=build] [OUT=runs/rl] [THREADS=2] [ROUNDS=1] [BASE_ZAYA]
set -euo pipefail
build=${1:-build} out=${2:-runs/rl} threads=${3:-2} rounds=${4:-1} base=${5:-}
cfg=configs/rl-tiny.toml
P=$(sed -n 's/^prompts_per_step = //p' $cfg) G=$(sed -n 's/^group_size = //p' $cfg)
micro=$(sed -n 's/^micro_batch = //p' $cfg) seq=$(sed -n 's/^seq_len = //p' $cfg)
accum=$(((P * G + micro - 1) / micro))
labels=(this) binaries=("$build/zaya")
if [ -n "$base" ]; then labels+=(base) binaries+=("$base"); fi
for ((r = 1; r <= rounds; ++r)); do
  for i in "${!labels[@]}"; do
    zaya=${binaries[$i]} d="$out/speed-${labels[$i]}-$r"
    rm -rf "$d" && mkdir -p "$d"
    "$zaya" rl --config $cfg --quiet --threads "$threads" --set model.init_from="\"$out/sft-run/final\"" \
      --set data.tokenizer="\"$out/tok.model\"" --set rl.prompts="\"$out/prompts.jsonl\"" --set rl.eval_prompts='""' \
      --set train.steps=10 --set checkpoint.final=false --set train.out_dir="\"$d/run\"" >/dev/null
    "$zaya" bench infer --model "$out/sft-run/final" --dtype f32 --no-working-set --prefill 256 --step-tokens 256 \
      --batch $((P * G)) --context "$seq" --decode-steps 128 --warmup 8 --threads "$threads" --json "$d/infer.json" >/dev/null
    "$zaya" bench train --preset tiny --set model.num_blocks=2 --micro-batch "$micro" --seq-len "$seq" \
      --grad-accum "$accum" --steps 10 --threads "$threads" --json "$d/train.json" >/dev/null
  done
done
python3 - "$out" "$P" "$G" "$micro" "$seq" "$accum" "$rounds" "${labels[@]}" <<'PY'
import json, statistics, sys
out, P, G, micro, seq, accum, rounds = sys.argv[1], *map(int, sys.argv[2:8])
med = statistics.median
def records(label):
    return [[json.loads(l) for l in open(f"{out}/speed-{label}-{r}/run/metrics.jsonl")] for r in range(1, rounds + 1)]
# Every sample's prompt tokens per step: G x the distinct prompts' (each prefilled once, the G samples forked from it;
# the same in every build).
prompt_of = G * max(med(x.get("rollout_prompt_tokens", 0) for rs in records(l) for x in rs if "rollout_tokens_per_s" in x)
                    for l in sys.argv[8:])
rollout_of = {}
for label in sys.argv[8:]:
    steps, dec, pre, tr = [], [], [], []
    for r in range(1, rounds + 1):
        d = f"{out}/speed-{label}-{r}"
        rs = [json.loads(l) for l in open(f"{d}/run/metrics.jsonl")]
        steps += [x for x in rs if "rollout_tokens_per_s" in x][2:]  # the first two steps warm up
        infer = json.load(open(f"{d}/infer.json"))
        dec += [x["tokens_per_second"] for x in infer["decode"] if x["batch"] == P * G]
        pre += [x["tokens_per_second"] for x in infer["prefill"]]
        tr.append(json.load(open(f"{d}/train.json"))["tokens_per_second"])
    roll = rollout_of[label] = med(x["rollout_tokens_per_s"] for x in steps)
    gen = med(x["rollout_tokens_per_s"] * x["rollout_seconds"] for x in steps)  # generated tokens per step
    prompt = prompt_of
    own_prompt = med(x.get("rollout_prompt_tokens", 0) for x in steps)  # what this build prefilled
    own_dec = med(x.get("rollout_decode_tokens_per_s", 0) for x in steps)
    upd = med(x["update_tokens_per_s"] for x in steps)
    dec_tps, pre_tps, tr_tps = med(dec), med(pre), med(tr)
    same_work = gen / (prompt / pre_tps + gen / dec_tps) if prompt > 0 else float("nan")
    print(f"[{label}] rollout: zaya rl {roll:.0f} generated tok/s ({gen:.0f} generated after {prompt:.0f} prompt "
          f"tokens per step, {own_prompt:.0f} of them prefilled)")
    print(f"  vs bench infer decode (batch {P * G}, context {seq}, f32 weights) {dec_tps:.0f} tok/s: "
          f"{roll / dec_tps:.2f}x")
    print(f"  vs the same work at bench infer's rates (prefill {pre_tps:.0f} tok/s + decode) {same_work:.0f} tok/s: "
          f"{roll / same_work:.2f}x")
    if 0 < own_prompt:
        own_work = gen / (own_prompt / pre_tps + gen / dec_tps)
        print(f"  vs the work left at bench infer's rates ({own_prompt:.0f} prompt tokens prefilled, the rest forked) "
              f"{own_work:.0f} tok/s: {roll / own_work:.2f}x")
    if own_dec > 0:
        print(f"  the rollout's decode-only steps {own_dec:.0f} tok/s vs bench infer decode: {own_dec / dec_tps:.2f}x")
    print(f"[{label}] update:  zaya rl {upd:.0f} tok/s vs zaya bench train ({micro} x {seq} x {accum}) {tr_tps:.0f} "
          f"tok/s: {upd / tr_tps:.2f}x")
if "base" in rollout_of:
    print(f"rollout, this build vs the base: {rollout_of['this'] / rollout_of['base']:.2f}x")
PY
