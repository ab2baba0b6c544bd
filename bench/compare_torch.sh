#!/usr/bin/env bash
# zaya.cpp against the PyTorch reference (tools/zaya_ref.py via bench/torch_train.py),
# same model, batch, recipe (AdamW + Muon) and thread count, one after the other
# in one run. Needs the dev packages: scripts/setup-debian.sh --dev
# (python3-torch, and OpenBLAS so that Debian's torch does not fall back to the
# netlib reference BLAS).
#
#   bench/compare_torch.sh [PRESET] [MICRO_BATCH] [SEQ] [ACCUM] [STEPS] [NS_DTYPE]
#   bench/compare_torch.sh small 8 256 4 3 bf16
# NS_DTYPE (f32 or bf16) sets the Newton-Schulz GEMM precision of Muon on both sides.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-small} batch=${2:-8} seq=${3:-256} accum=${4:-4} steps=${5:-3} ns=${6:-bf16}
threads=${THREADS:-$(nproc)}
zaya=${ZAYA:-build/zaya}
out=${OUT:-runs/bench}
mkdir -p "$out"
[[ -x $zaya ]] || { echo "build zaya first (cmake --build build)" >&2; exit 1; }

echo "== zaya.cpp: $preset, $batch x $seq x $accum tokens/step, $threads threads, Newton-Schulz in $ns"
"$zaya" bench train --preset "$preset" --micro-batch "$batch" --seq-len "$seq" --grad-accum "$accum" \
  --steps "$steps" --warmup 1 --threads "$threads" --set "optim.ns_dtype=$ns" --json "$out/zaya_$preset.json"
echo "== PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'): same configuration"
/usr/bin/python3 bench/torch_train.py --preset "$preset" --batch "$batch" --seq "$seq" --accum "$accum" \
  --steps "$steps" --warmup 1 --threads "$threads" --ns-dtype "$ns" --json "$out/torch_$preset.json" >/dev/null

/usr/bin/python3 - "$out/zaya_$preset.json" "$out/torch_$preset.json" <<'PY'
import json, sys
z = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
zt, tt = z["tokens_per_second"], t["tokens_per_s"]
print(f"zaya.cpp : {zt:10.1f} tokens/s  (step {z['step_seconds']:.2f} s, MFU {100*z['mfu']:.1f}% of "
      f"{z['peak_gemm_gflops']:.0f} GFLOP/s)")
blas = ", ".join(t.get("blas_libraries") or ["?"])
print(f"PyTorch  : {tt:10.1f} tokens/s  (step {t['step_time_s']['mean']:.2f} s: forward+backward "
      f"{t['fwd_bwd_time_s_mean']:.2f} s, optimizer {t['optimizer_time_s_mean']:.2f} s; BLAS {blas})")
if t.get("blas_is_netlib_reference"):
    print("warning: PyTorch used the netlib reference BLAS; install libopenblas0-openmp for a fair comparison")
print(f"ratio    : {zt/tt:.2f}x")
PY
