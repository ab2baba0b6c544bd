#!/usr/bin/env bash
# The [bench] verbs end to end: zaya bench comm (single process and under
# mpirun: every collective, rank splitting, all_to_all_v from routing loads,
# the bandwidth gate, a wrong reduction and a hang caught), bench gemm (sweep
# and --model), bench membw, bench io, and zaya report over all their JSON.
source "$(dirname "$0")/common.bash" "$@"
export OMP_NUM_THREADS=1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=()
if command -v mpirun >/dev/null; then MPIRUN=(mpirun --oversubscribe --allow-run-as-root); fi
J=$WORK/json
mkdir -p "$J"

expect_in() {  # expect_in FILE PATTERN: the file must match the extended regex
  grep -Eq -- "$2" "$1" || fail "$1 lacks /$2/: $(head -c 600 "$1")"
}

# --- bench comm, one process ---
"$ZAYA" bench comm all_reduce,all_gather,broadcast,reduce_scatter -b 8 -e 4K -f 8 -n 3 -w 1 --json "$J/comm1.json" >"$WORK/c1.txt"
expect_in "$WORK/c1.txt" "Out of bounds values : 0 OK"
expect_in "$J/comm1.json" '"ok": true'
expect_error 1 "send_recv needs at least 2 ranks" -- "$ZAYA" bench comm send_recv -b 8 -e 8
expect_error 2 "unknown unit 'X'" -- "$ZAYA" bench comm -b 3X
expect_error 1 "unknown collective 'gather'" -- "$ZAYA" bench comm gather -b 8 -e 8
expect_error 1 "-o avg needs a floating-point data type" -- "$ZAYA" bench comm -o avg -d int32 -b 8 -e 8
expect_error 1 "minbytes 64 > maxbytes 8" -- "$ZAYA" bench comm -b 64 -e 8
echo "ok: bench comm, one process"

if ((${#MPIRUN[@]})); then
  # Every collective on 2 ranks, all data types of all_reduce and reduce_scatter, per-iteration statistics.
  "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm all -b 8 -e 64K -f 8 -n 3 -w 1 -I 1 --json "$J/comm2.json" >"$WORK/c2.txt"
  expect_in "$WORK/c2.txt" "Out of bounds values : 0 OK"
  expect_in "$WORK/c2.txt" "i_p99"
  [[ $(grep -c '"collective"' "$J/comm2.json") == 8 ]] || fail "comm2.json should hold 8 collectives"
  "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm all_reduce,reduce_scatter -d all -o sum,max -b 64 -e 1K -f 16 -n 2 -w 1 \
    >"$WORK/c2d.txt"
  expect_in "$WORK/c2d.txt" "Out of bounds values : 0 OK"
  expect_in "$WORK/c2d.txt" "bfloat16"
  # Four ranks in two groups of two (one rank per "node" of two): the groups run at once.
  "${MPIRUN[@]}" -np 4 "$ZAYA" bench comm all_reduce --split "MOD 2" -b 1K -e 16K -f 4 -n 3 -w 1 \
    --json "$J/comm4split.json" >"$WORK/c4.txt"
  expect_in "$WORK/c4.txt" "4 ranks, 2 group\(s\) of 2 \(split MOD 2\)"
  expect_in "$J/comm4split.json" '"groups": 2'
  expect_error 1 "makes groups of different sizes" -- "${MPIRUN[@]}" -np 3 "$ZAYA" bench comm --split "DIV 2" -b 8 -e 8
  # all_to_all_v from the routing loads zaya train logs (4 experts over 2 ranks).
  printf '%s\n' '{"step":5,"loss":3.1,"routing":[{"layer":1,"load":[0.5,0.3,0.1,0.1],"skip":0.0,"entropy":1.0}]}' \
    >"$WORK/metrics.jsonl"
  "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm all_to_all_v --routing "$WORK/metrics.jsonl" --write-matrix "$WORK/m.txt" \
    -b 1K -e 64K -f 8 -n 3 -w 1 --json "$J/a2av.json" >"$WORK/a2av.txt"
  expect_in "$WORK/a2av.txt" "Out of bounds values : 0 OK"
  expect_in "$WORK/m.txt" "^0.8 0.2$"
  expect_in "$J/a2av.json" '"imbalance": 1.6'
  "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm alltoallv --matrix "$WORK/m.txt" -b 1K -e 1K -n 2 -w 1 >/dev/null
  # The bandwidth gate, a wrong reduction, and a hang turned into an error by the timeout.
  expect_error 1 "below 0.9 x --min-bw" -- "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm -b 1K -e 1K -n 2 -w 1 --min-bw 1e6
  expect_error 1 "wrong elements" -- "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm -b 1K -e 4K -f 4 -n 2 -w 1 --inject-fault drop-rank
  start=$SECONDS
  expect_error 1 "did not complete within 1 s" -- "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm -b 1K -e 1K -n 2 -w 1 -T 1 \
    --inject-fault stall --stall-seconds 60
  ((SECONDS - start < 50)) || fail "the stalled run was not stopped by the timeout"
  echo "ok: bench comm under mpirun"
else
  echo "skipped: bench comm under mpirun (no mpirun)"
fi

# --- bench gemm: a sweep with a falloff check, and a model's shapes ---
"$ZAYA" bench gemm -m 64,96 -n 64 -k 64:128 --align 32 --min-time 0 --min-calls 2 --peak-size 256 --membw-gbps 10 \
  --json "$J/gemm.json" >"$WORK/g.txt"
expect_in "$J/gemm.json" '"format": "zaya.gemm_efficiency"'
[[ $(grep -c '"efficiency"' "$J/gemm.json") == 8 ]] || fail "gemm.json should hold 2 x 2 x 2 entries"
"$ZAYA" bench gemm --model tiny --micro-batch 1 --seq-len 64 --dtype bf16 --min-time 0 --min-calls 1 --peak-size 256 \
  --membw-gbps 10 --json "$J/gemm_model.json" >"$WORK/gm.txt"
expect_in "$WORK/gm.txt" "moe.expert.fc1"
expect_in "$WORK/gm.txt" "bf16 GEMMs of one micro-batch \(forward \+ backward\)"
expect_in "$J/gemm_model.json" '"expert_tokens": 16'
expect_error 1 "neither a preset" -- "$ZAYA" bench gemm --model nosuch --min-time 0
expect_error 2 "layout" -- "$ZAYA" bench gemm --layout xx
echo "ok: bench gemm"

# --- bench membw and bench io ---
"$ZAYA" bench membw --min-bytes 16K --max-bytes 256K --factor 4 --threads 1 --reps 1 --json "$J/membw.json" >"$WORK/mb.txt" 2>/dev/null
expect_in "$WORK/mb.txt" "triad/1t"
[[ $(grep -c '"kernel"' "$J/membw.json") == 15 ]] || fail "membw.json should hold 5 kernels x 3 sizes"
"$ZAYA" bench io --dir "$WORK" --file-size 8M --block-size 1M --files 2 --page-reads 100 --samples 20 --seq-len 1024 \
  --batch 64 --step-time 1 --json "$J/io.json" >"$WORK/io.txt"
expect_in "$WORK/io.txt" "scatter factor sigma"
expect_in "$WORK/io.txt" "break-even step time"
expect_in "$J/io.json" '"bench": "io"'
ls "$WORK"/zaya-bench-io.* >/dev/null 2>&1 && fail "bench io left its files behind"
expect_error 1 "neither it nor" -- "$ZAYA" bench io --dir "$WORK" --file-size 0 --dataset "$WORK/none"
echo "ok: bench membw, bench io"

# --- report over everything ---
cp "$WORK/metrics.jsonl" "$J/" 2>/dev/null || true
"$ZAYA" report "$J" --out "$WORK/report" --json "$WORK/report.json" >"$WORK/r.txt"
expect_in "$WORK/report/index.html" "<svg"
expect_in "$WORK/report/index.html" "GEMM efficiency"
[[ -f "$WORK/report/io_breakeven.svg" ]] || fail "report lacks io_breakeven.svg"
ls "$WORK"/report/gemm_*.svg >/dev/null || fail "report lacks GEMM heat maps"
ls "$WORK"/report/membw_*.svg >/dev/null || fail "report lacks bandwidth plots"
if ((${#MPIRUN[@]})); then [[ -f "$WORK/report/comm_all_reduce.svg" ]] || fail "report lacks comm_all_reduce.svg"; fi
expect_error 2 "inputs is required" -- "$ZAYA" report
echo "ok: report"
