#!/usr/bin/env bash
# Activation recomputation side by side (train.recompute = none, attention,
# moe, full), one `zaya bench train` process per setting so each peak
# resident set is its own: the batch-sized workspace, the activations kept
# for backward, the peak RSS and tokens/s; and, for comparison, the
# planner's activation bytes and step time (zaya plan on PROFILE, a CPU
# profile JSON from `zaya profile measure`, when given; the plan's GEMM
# dtype follows a `--set train.precision=...` override, else f32). Best of
# REPEAT rounds for the speed; the memory figures are the same every round.
#
#   bench/recompute_memory.sh [PRESET|CONFIG.toml] [MICRO_BATCH] [SEQ] [STEPS] [--set k=v ...]
#   bench/recompute_memory.sh small 8 256 3
#   bench/recompute_memory.sh small 8 256 3 --set train.precision=bf16
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-small} batch=${2:-8} seq=${3:-256} steps=${4:-3}
shift $(($# < 4 ? $# : 4))
overrides=("$@")
threads=${THREADS:-$(nproc)}
repeat=${REPEAT:-1}
zaya=${ZAYA:-build/zaya}
out=${OUT:-runs/bench}
mkdir -p "$out"
[[ -x $zaya ]] || { echo "build zaya first (cmake --build build)" >&2; exit 1; }
src=(--preset "$model")
[[ $model == *.toml ]] && src=(--config "$model")
tag=$(basename "$model" .toml)
settings=(none attention moe full)
# The summary takes the best of this run's rounds: no earlier run's files.
rm -f "$out"/recompute_"${tag}"_*.json

for r in $(seq "$repeat"); do
  for s in "${settings[@]}"; do
    "$zaya" bench train "${src[@]}" --micro-batch "$batch" --seq-len "$seq" --steps "$steps" --warmup 1 \
      --threads "$threads" "${overrides[@]}" --set "train.recompute=$s" --json "$out/recompute_${tag}_${s}_$r.json" \
      >/dev/null
  done
done
if [[ -n ${PROFILE:-} && $model != *.toml ]]; then
  dtype=f32
  for o in "${overrides[@]}"; do [[ $o == train.precision=bf16 ]] && dtype=bf16; done
  for s in "${settings[@]}"; do
    "$zaya" plan --profile "$PROFILE" --model "$model" --micro-batch "$batch" --seq-len "$seq" --recompute "$s" \
      --dtype "$dtype" \
      --no-tradeoff --top-gemms 0 --json "$out/recompute_${tag}_${s}_plan.json" >/dev/null
  done
fi

/usr/bin/python3 - "$out" "$tag" "$repeat" "$batch" "$seq" "$threads" "${settings[@]}" <<'PY'
import glob, json, os, sys
out, tag, repeat, batch, seq, threads, *settings = sys.argv[1:]
print(f"== {tag}: {batch} x {seq} tokens per micro-batch, {threads} threads, best of {repeat}")
print(f"{'recompute':10} {'workspace MB':>13} {'activations MB':>15} {'peak RSS MB':>12} {'tokens/s':>10} "
      f"{'step s':>8} {'planned MB':>11} {'planned s':>10} {'error':>7}")
base = None
for s in settings:
    runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"recompute_{tag}_{s}_[0-9]*.json")))]
    z = max(runs, key=lambda j: j["tokens_per_second"])
    base = base or z
    plan = os.path.join(out, f"recompute_{tag}_{s}_plan.json")
    planned = ""
    if os.path.exists(plan):
        pj = json.load(open(plan))
        m, step = pj["memory_bytes"], pj["step"]["step_seconds"]
        planned = (f"{(m['activations'] + m['logits']) / 1e6:11.1f} {step:10.3f} "
                   f"{100 * (step / z['step_seconds'] - 1):+6.1f}%")
    print(f"{s:10} {z['workspace_bytes_per_rank'] / 1e6:13.1f} {z['activation_bytes_per_rank'] / 1e6:15.1f} "
          f"{z['peak_rss_bytes_per_rank'] / 1e6:12.1f} {z['tokens_per_second']:10.1f} {z['step_seconds']:8.3f} "
          f"{planned}  ({z['tokens_per_second'] / base['tokens_per_second']:.2f}x none's speed, "
          f"{z['workspace_bytes_per_rank'] / base['workspace_bytes_per_rank']:.2f}x its workspace)")
PY
