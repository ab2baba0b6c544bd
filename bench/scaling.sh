#!/usr/bin/env bash
# Data-parallel scaling of `zaya bench train` from 1 to 2 ranks (one thread per
# rank, so 1 rank uses one core and 2 ranks use two), side by side in one run.
#   bench/scaling.sh [PRESET] [MICRO_BATCH] [SEQ] [ACCUM] [STEPS] [EP]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-small} batch=${2:-4} seq=${3:-256} accum=${4:-2} steps=${5:-3} ep=${6:-1}
zaya=${ZAYA:-build/zaya}
out=${OUT:-runs/bench}
mkdir -p "$out"
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
args=(bench train --preset "$preset" --micro-batch "$batch" --seq-len "$seq" --grad-accum "$accum"
      --steps "$steps" --warmup 1 --threads 1)
echo "== 1 rank"
"$zaya" "${args[@]}" --json "$out/scaling_1.json"
echo "== 2 ranks (ep $ep)"
mpirun --oversubscribe --allow-run-as-root -np 2 "$zaya" "${args[@]}" --set "parallel.ep=$ep" \
  --json "$out/scaling_2.json"
python3 - "$out/scaling_1.json" "$out/scaling_2.json" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:3])
eff = two["tokens_per_second"] / (2 * one["tokens_per_second"])
print(f"1 rank : {one['tokens_per_second']:9.1f} tokens/s")
print(f"2 ranks: {two['tokens_per_second']:9.1f} tokens/s aggregate (dp {two['dp']} x ep {two['ep']})")
print(f"scaling efficiency 1 -> 2 ranks: {100 * eff:.1f}%")
PY
