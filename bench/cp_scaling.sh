#!/usr/bin/env bash
# Context parallelism on this machine: memory per rank and training tokens/s
# against the sequence length, for cp = 1, 2 and 4 (docs/context-extension.md).
# One micro-batch of one sequence per step, synthetic tokens, the same global
# batch in every layout. cp = 1 runs one rank with all cores; cp = N runs N
# ranks with CORES / N threads each (at least 1: cp = 4 oversubscribes a
# 2-core machine), so each layout uses the same cores.
#
# usage: bench/cp_scaling.sh ZAYA_BINARY OUT_DIR
#   env: PRESET (small), SEQS ("512 1024 2048 4096"), CPS ("1 2 4"), STEPS (3),
#        WARMUP (1), CORES (nproc), MPIRUN (mpirun --oversubscribe --allow-run-as-root)
set -euo pipefail
ZAYA=$(realpath "${1:?usage: cp_scaling.sh ZAYA_BINARY OUT_DIR}"); OUT=${2:?usage: cp_scaling.sh ZAYA_BINARY OUT_DIR}
mkdir -p "$OUT"
read -r -a MPI <<<"${MPIRUN:-mpirun --oversubscribe --allow-run-as-root}"
PRESET=${PRESET:-small} SEQS=${SEQS:-"512 1024 2048 4096"} CPS=${CPS:-"1 2 4"}
STEPS=${STEPS:-3} WARMUP=${WARMUP:-1} CORES=${CORES:-$(nproc)}

printf '%-6s %-4s %12s %14s %16s %12s\n' seq cp tokens/s step_s workspace_MB rss_MB | tee "$OUT/cp_scaling.txt"
for seq in $SEQS; do
  for cp in $CPS; do
    threads=$((CORES / cp)); ((threads >= 1)) || threads=1
    json=$OUT/cp${cp}_seq${seq}.json
    args=(bench train --preset "$PRESET" --micro-batch 1 --seq-len "$seq" --steps "$STEPS" --warmup "$WARMUP"
          --threads "$threads" --set "parallel.cp=$cp" --json "$json")
    if ((cp == 1)); then "$ZAYA" "${args[@]}" >"$OUT/cp${cp}_seq${seq}.txt"
    else OMP_NUM_THREADS=$threads "${MPI[@]}" -np "$cp" "$ZAYA" "${args[@]}" >"$OUT/cp${cp}_seq${seq}.txt"; fi
    python3 - "$json" "$seq" "$cp" <<'PY' | tee -a "$OUT/cp_scaling.txt"
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<6} {sys.argv[3]:<4} {j['tokens_per_second']:12.0f} {j['step_seconds']:14.3f} "
      f"{j['workspace_bytes_per_rank'] / 1e6:16.1f} {j['peak_rss_bytes_per_rank'] / 1e6:12.1f}")
PY
  done
done
