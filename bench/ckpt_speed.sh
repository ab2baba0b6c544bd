#!/usr/bin/env bash
# Checkpoint speed, side by side in one run on the same disk:
#  1. the disk's sequential write speed (dd, 1 GiB, fdatasync) and read speed;
#  2. `zaya bench train` on the small preset without and with an async
#     checkpoint every 50 steps: the step-time overhead;
#  3. save and load throughput of the checkpoint it wrote (load = read +
#     verify every checksum, `zaya ckpt verify`).
#   bench/ckpt_speed.sh [STEPS] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-100} dir=${2:-runs/bench/ckpt}
zaya=${ZAYA:-build/zaya}
mkdir -p "$dir"
echo "== disk: dd 1 GiB sequential write (fdatasync) and read, in $dir"
dd if=/dev/zero of="$dir/dd.bin" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
dd if="$dir/dd.bin" of=/dev/null bs=1M 2>&1 | tail -1
rm -f "$dir/dd.bin"
common=(bench train --preset small --micro-batch 8 --seq-len 256 --steps "$steps" --warmup 2)
echo "== small preset, $steps steps, no checkpoints"
"$zaya" "${common[@]}" --json "$dir/none.json" | sed -n 2,3p
echo "== small preset, $steps steps, async checkpoint every 50 steps"
"$zaya" "${common[@]}" --checkpoint-every 50 --checkpoint-dir "$dir/checkpoints" --json "$dir/every50.json" | sed -n 2,4p
python3 - "$dir/none.json" "$dir/every50.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print(f"step time {a['step_seconds']:.3f} s -> {b['step_seconds']:.3f} s: overhead "
      f"{100 * (b['step_seconds'] / a['step_seconds'] - 1):+.1f}%")
PY
ck=$(ls -d "$dir"/checkpoints/step_* | tail -1)
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
echo "== load: $("$zaya" ckpt verify "$ck")"
