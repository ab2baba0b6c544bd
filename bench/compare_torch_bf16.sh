#!/usr/bin/env bash
# Mixed precision side by side, in one run, same model, batch, recipe and
# threads: zaya.cpp float32, zaya.cpp bf16 (train.precision = "bf16"), and,
# when Debian's PyTorch imports, the PyTorch reference (bench/torch_train.py)
# in float32 and under bf16 autocast. Best of REPEAT rounds (the machine is
# shared: every figure is the best step time of its round).
#
#   bench/compare_torch_bf16.sh [PRESET|CONFIG.toml] [MICRO_BATCH] [SEQ] [ACCUM] [STEPS] [--set k=v ...]
#   bench/compare_torch_bf16.sh small 8 256 1 3
#   bench/compare_torch_bf16.sh zaya1-base 1 512 1 2 --set model.num_blocks=2 --set model.vocab_size=32768 \
#     --set model.experts=4
# The --set overrides go to zaya only; PyTorch runs the presets tiny and small.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-small} batch=${2:-8} seq=${3:-256} accum=${4:-1} steps=${5:-3}
shift $(($# < 5 ? $# : 5))
overrides=("$@")
threads=${THREADS:-$(nproc)}
repeat=${REPEAT:-2}
zaya=${ZAYA:-build/zaya}
out=${OUT:-runs/bench}
mkdir -p "$out"
[[ -x $zaya ]] || { echo "build zaya first (cmake --build build)" >&2; exit 1; }
src=(--preset "$model")
[[ $model == *.toml ]] && src=(--config "$model")
tag=$(basename "$model" .toml)
# The summary below takes the best of this run's files: earlier runs' (other
# overrides, more rounds) must not be among them.
rm -f "$out"/zaya_"${tag}"_*.json "$out"/torch_"${tag}"_*.json "$out"/torch_"${tag}"_*.log

torch_ok=0
if /usr/bin/python3 -c "import torch" 2>/dev/null && [[ $model == tiny || $model == small ]]; then torch_ok=1; fi

for r in $(seq "$repeat"); do
  for p in f32 bf16; do
    "$zaya" bench train "${src[@]}" --micro-batch "$batch" --seq-len "$seq" --grad-accum "$accum" --steps "$steps" \
      --warmup 1 --threads "$threads" --set "train.precision=$p" "${overrides[@]}" \
      --json "$out/zaya_${tag}_${p}_$r.json" >/dev/null
  done
  if ((torch_ok)); then
    for p in off bf16; do
      /usr/bin/python3 bench/torch_train.py --preset "$model" --batch "$batch" --seq "$seq" --accum "$accum" \
        --steps "$steps" --warmup 1 --threads "$threads" --ns-dtype bf16 --autocast "$p" \
        --json "$out/torch_${tag}_${p}_$r.json" >/dev/null 2>"$out/torch_${tag}_${p}_$r.log" ||
        echo "PyTorch (autocast $p) failed: see $out/torch_${tag}_${p}_$r.log" >&2
    done
  fi
done

/usr/bin/python3 - "$out" "$tag" "$repeat" "$batch" "$seq" "$accum" "$threads" <<'PY'
import glob, json, os, sys
out, tag, repeat, batch, seq, accum, threads = sys.argv[1:]
def best(pattern, key):
    runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, pattern)))]
    return max(runs, key=key) if runs else None
zf = best(f"zaya_{tag}_f32_*.json", lambda j: j["tokens_per_second"])
zb = best(f"zaya_{tag}_bf16_*.json", lambda j: j["tokens_per_second"])
tf = best(f"torch_{tag}_off_*.json", lambda j: j["tokens_per_s"] or 0)
tb = best(f"torch_{tag}_bf16_*.json", lambda j: j["tokens_per_s"] or 0)
print(f"== {tag}: {batch} x {seq} x {accum} accum tokens/step, {threads} threads, best of {repeat}")
print(f"{'':22} {'tokens/s':>10} {'step s':>8} {'GFLOP/s':>9} {'MFU':>7}  peak")
for name, z in (("zaya.cpp f32", zf), ("zaya.cpp bf16", zb)):
    print(f"{name:22} {z['tokens_per_second']:10.1f} {z['step_seconds']:8.3f} {z['model_gflops_per_second']:9.1f} "
          f"{100 * z['mfu']:6.1f}%  {z['precision']} {z['peak_gemm_gflops']:.0f} GFLOP/s")
for name, t in (("PyTorch f32", tf), ("PyTorch bf16 autocast", tb)):
    if t is None:
        continue
    blas = ", ".join(t.get("blas_libraries") or ["?"])
    print(f"{name:22} {t['tokens_per_s']:10.1f} {t['step_time_s']['mean']:8.3f}  (BLAS {blas})")
ratio = zb["tokens_per_second"] / zf["tokens_per_second"]
print(f"zaya bf16 / zaya f32: {ratio:.2f}x")
faster = max([t["tokens_per_s"] for t in (tf, tb) if t is not None] or [0])
if faster > 0:
    print(f"zaya bf16 / faster PyTorch: {zb['tokens_per_second'] / faster:.2f}x")
PY
