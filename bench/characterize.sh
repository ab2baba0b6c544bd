#!/usr/bin/env bash
# Characterizes a machine the way docs/bench.md's worked example does:
# collectives, GEMM sizing, memory bandwidth and storage, then one report.
#
# usage: bench/characterize.sh ZAYA_BINARY OUT_DIR
#   env: NPS ("2 4": rank counts for bench comm), COMM_MAX (64M), MODEL (small),
#        BIG_MODEL (zaya1-base; empty to skip), IO_DIR (OUT_DIR), IO_SIZE (1G),
#        DATASET (runs/data/kjv/train if present), ROUTING (runs/tiny/metrics.jsonl if present),
#        MEMBW_MAX (2G), MPIRUN (mpirun --oversubscribe --allow-run-as-root),
#        TIME_STAT (mean: nccl-tests' time; median resists a shared machine's stalls)
set -euo pipefail
ZAYA=$(realpath "${1:?usage: characterize.sh ZAYA_BINARY OUT_DIR}"); OUT=${2:?usage: characterize.sh ZAYA_BINARY OUT_DIR}
mkdir -p "$OUT/json"
J=$OUT/json
read -r -a MPI <<<"${MPIRUN:-mpirun --oversubscribe --allow-run-as-root}"
NPS=${NPS:-"2 4"} COMM_MAX=${COMM_MAX:-64M} MODEL=${MODEL:-small} BIG_MODEL=${BIG_MODEL-zaya1-base}
IO_DIR=${IO_DIR:-$OUT} IO_SIZE=${IO_SIZE:-1G} MEMBW_MAX=${MEMBW_MAX:-2G} TIME_STAT=${TIME_STAT:-mean}
DATASET=${DATASET:-$( [[ -f runs/data/kjv/train.bin ]] && echo runs/data/kjv/train || true)}
ROUTING=${ROUTING:-$( [[ -f runs/tiny/metrics.jsonl ]] && echo runs/tiny/metrics.jsonl || true)}
log() { echo "== $*" >&2; }

for np in $NPS; do
  log "bench comm, $np ranks"
  OMP_NUM_THREADS=1 "${MPI[@]}" -np "$np" "$ZAYA" bench comm all -b 8 -e "$COMM_MAX" -f 4 -n 20 -w 5 -I 1 \
    --time-stat "$TIME_STAT" \
    --json "$J/comm_np$np.json" | tee "$OUT/comm_np$np.txt"
  if ((np % 2 == 0 && np >= 4)); then
    OMP_NUM_THREADS=1 "${MPI[@]}" -np "$np" "$ZAYA" bench comm all_reduce -b 1K -e "$COMM_MAX" -f 4 --split "MOD 2" \
      --time-stat "$TIME_STAT" \
      --json "$J/comm_np${np}_mod2.json" | tee "$OUT/comm_np${np}_mod2.txt"
  fi
done
if [[ -n $ROUTING ]]; then
  log "bench comm all_to_all_v from $ROUTING"
  OMP_NUM_THREADS=1 "${MPI[@]}" -np 2 "$ZAYA" bench comm all_to_all_v --routing "$ROUTING" --routing-layer max \
    --write-matrix "$OUT/routing_matrix.txt" -b 1K -e "$COMM_MAX" -f 4 --time-stat "$TIME_STAT" --json "$J/comm_a2av_routing.json" \
    | tee "$OUT/comm_a2av_routing.txt"
fi
log "bench gemm sweep"
"$ZAYA" bench gemm -m 256:4096:*2 -n 256:4096:*2 -k 512,2048 --json "$J/gemm_sweep.json" | tee "$OUT/gemm_sweep.txt"
log "bench gemm --model $MODEL"
"$ZAYA" bench gemm --model "$MODEL" --json "$J/gemm_$MODEL.json" | tee "$OUT/gemm_$MODEL.txt"
if [[ -n $BIG_MODEL ]]; then
  log "bench gemm --model $BIG_MODEL"
  "$ZAYA" bench gemm --model "$BIG_MODEL" --micro-batch 1 --seq-len 1024 --dtype bf16 --min-time 0.05 \
    --json "$J/gemm_$BIG_MODEL.json" | tee "$OUT/gemm_$BIG_MODEL.txt"
fi
log "bench membw"
"$ZAYA" bench membw --max-bytes "$MEMBW_MAX" --json "$J/membw.json" | tee "$OUT/membw.txt"
log "bench io"
"$ZAYA" bench io --dir "$IO_DIR" --file-size "$IO_SIZE" --files 2 --json "$J/io.json" | tee "$OUT/io.txt"
if [[ -n $DATASET ]]; then
  "$ZAYA" bench io --dir "$IO_DIR" --file-size 0 --dataset "$DATASET" --page-reads 0 --samples 100000 --iops \
    "$(grep -o '"iops": [0-9.e+]*' "$J/io.json" | head -1 | awk '{print $2}')" --json "$J/io_dataset.json" \
    | tee "$OUT/io_dataset.txt"
fi
log "report"
"$ZAYA" report "$J" ${ROUTING:+"$ROUTING"} --out "$OUT/report"
