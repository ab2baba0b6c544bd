#!/usr/bin/env bash
# The main job (configs/tiny.toml) in float32 and in bf16 (train.precision),
# and the difference of their final validation losses (issue [mixed]: within
# 0.05 nats). Minutes per run on 2 cores; not a CI test. Prepare the data
# first (scripts/quickstart.sh does it).
#
#   bench/main_job_precision.sh [--set section.key=value ...]
# PARALLEL=1 runs the two at once, one thread each (the losses do not depend
# on the timing; the tokens/s then do not compare with a run alone).
set -euo pipefail
cd "$(dirname "$0")/.."
zaya=${ZAYA:-build/zaya}
out=${OUT:-runs/main_job_precision}
[[ -x $zaya ]] || { echo "build zaya first (cmake --build build)" >&2; exit 1; }
[[ -f runs/data/kjv/train.idx ]] || { echo "no data: run scripts/quickstart.sh first" >&2; exit 1; }
mkdir -p "$out"
run() {  # precision [extra flags]
  local p=$1
  shift
  "$zaya" train --config configs/tiny.toml --quiet --set train.precision="$p" --set train.out_dir="$out/$p" "$@" "${ARGS[@]}" \
    >"$out/$p.log" 2>&1 || { cat "$out/$p.log"; exit 1; }
}
ARGS=("$@")
if [[ ${PARALLEL:-0} == 1 ]]; then
  run f32 --set train.threads=1 &
  run bf16 --set train.threads=1 &
  wait
else
  run f32
  run bf16
fi
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def last_val(p):
    vals = [json.loads(l) for l in open(f"{out}/{p}/metrics.jsonl") if '"val_loss"' in l]
    return vals[-1]["step"], vals[-1]["val_loss"]
(sf, f), (sb, b) = last_val("f32"), last_val("bf16")
print(f"final validation loss: f32 {f:.4f} (step {sf}), bf16 {b:.4f} (step {sb}), bf16 - f32 = {b - f:+.4f} nats")
sys.exit(0 if abs(b - f) <= 0.05 else 1)
PY
