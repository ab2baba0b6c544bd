#!/usr/bin/env bash
# `zaya rl` checkpoints and resume (docs/rl.md "Checkpoints and resume"): a run
# stopped at step 4 (--stop-at) and resumed, and a run whose process is killed
# at step 5 under `zaya launch` (restarted from its step-4 checkpoint), end with
# the final weights and the final checkpoint of the uninterrupted run bit for
# bit, and with its metrics.jsonl (every value but the timings and tokens/s):
# the prompt order, the sampling seeds, the optimizer and the KL reference
# resume exactly. Full-parameter (with a KL penalty) and LoRA.
source "$(dirname "$0")/common.bash" "$@"

prepare_rl_task
base=(--config "$SRC/configs/rl-tiny.toml" --quiet --set model.init_from='""' --set data.tokenizer="\"$WORK/tok.model\""
  --set rl.prompts="\"$WORK/prompts.jsonl\"" --set rl.eval_prompts="\"$WORK/eval.jsonl\"" --set rl.eval_every=3
  --set rl.prompts_per_step=3 --set rl.group_size=4 --set rl.max_new_tokens=6 --set train.seq_len=64
  --set train.micro_batch=8 --set train.steps=8 --set rl.command="\"python3 $WORK/len_reward.py\""
  --set optim.lr=1e-3 --set rl.kl_coef=0.05 --set checkpoint.every=2 --set checkpoint.keep_last=2)
# The metrics without the values that are timings.
metrics() { python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: v for k, v in r.items() if not (k.endswith("_seconds") or k.endswith("_per_s"))}))
PY
}
check_same() {  # dir_a dir_b what weights_file
  diff <(metrics "$1/metrics.jsonl") <(metrics "$2/metrics.jsonl") >/dev/null || fail "$3: metrics.jsonl differs"
  cmp -s "$1/$4" "$2/$4" || fail "$3: the final weights differ"
  "$ZAYA" ckpt compare "$1/checkpoints/step_00000008" "$2/checkpoints/step_00000008" >/dev/null ||
    fail "$3: the final checkpoints differ (weights or optimizer state)"
  echo "ok: $3 ends as the uninterrupted run, bit for bit"
}

run_case() {  # name weights_file extra --set arguments...
  local name=$1 weights=$2; shift 2
  "$ZAYA" rl "${base[@]}" "$@" --set train.out_dir="\"$WORK/$name-full\"" >/dev/null
  [[ $(grep -c '"reward_mean"' "$WORK/$name-full/metrics.jsonl") == 8 ]] || fail "$name: not 8 step records"
  [[ $(grep -c '"eval_reward"' "$WORK/$name-full/metrics.jsonl") == 4 ]] || fail "$name: not 4 evaluations"
  # The weights moved: the run is not trivially resumable.
  "$ZAYA" ckpt compare "$WORK/$name-full/checkpoints/step_00000006" "$WORK/$name-full/checkpoints/step_00000008" \
    >/dev/null 2>&1 && fail "$name: steps 7-8 did not change the checkpoint"
  "$ZAYA" rl "${base[@]}" "$@" --set train.out_dir="\"$WORK/$name-split\"" --stop-at 4 >/dev/null
  [[ -d $WORK/$name-split/checkpoints/step_00000004 && ! -e $WORK/$name-split/$weights ]] ||
    fail "$name: --stop-at 4 left no checkpoint, or final weights"
  expect_error 1 "already holds checkpoints.*pass --resume" -- \
    "$ZAYA" rl "${base[@]}" "$@" --set train.out_dir="\"$WORK/$name-split\""
  "$ZAYA" rl "${base[@]}" "$@" --set train.out_dir="\"$WORK/$name-split\"" --resume >/dev/null
  check_same "$WORK/$name-full" "$WORK/$name-split" "$name: stop at 4, resume" "$weights"
  # A killed process (SIGKILL at the start of step 5) under the supervisor: restarted, it resumes from step 4.
  "$ZAYA" launch --backoff 0.2 --inject kill:rank=0,step=5 -- rl "${base[@]}" "$@" \
    --set train.out_dir="\"$WORK/$name-launch\"" >"$WORK/$name-launch.log" 2>&1 ||
    { cat "$WORK/$name-launch.log"; fail "$name: zaya launch gave up"; }
  grep -q '"event":"crash"' "$WORK/$name-launch/incidents.jsonl" || fail "$name: no crash incident"
  grep -q '"event":"finished"' "$WORK/$name-launch/incidents.jsonl" || fail "$name: the relaunch did not finish"
  check_same "$WORK/$name-full" "$WORK/$name-launch" "$name: killed at step 5 under zaya launch" "$weights"
}
run_case full final/model.safetensors
run_case lora adapter/adapter_model.safetensors --set lora.rank=4 --set lora.dropout=0 --set optim.lr=1e-2

echo "ok: rl resume"
