#!/usr/bin/env bash
# Validates `zaya bench comm` and `zaya bench membw` against independent
# programs (docs/bench.md, "Validation"):
#   all_reduce: zaya bench comm vs a plain MPI loop (mpi_coll_loop.c) making the same
#               call (blocking MPI_Allreduce); MPI_Iallreduce + MPI_Wait is shown too
#   membw:      zaya bench membw vs a plain C STREAM build (stream_ref.c) and, when
#               STREAM_C names McCalpin's stream.c (not shipped: its licence asks
#               for its own labelling), vs the official STREAM built from it
#   #wrong:     a deliberately wrong reduction (a dropped rank, one corrupted
#               element) must be counted, and a correct one must count zero
# Each side runs ROUNDS times, alternating, and the medians are compared; a
# size "agrees" when the medians differ by less than the larger of TOL and the
# spread (max/min - 1) of either side's rounds, i.e. within the noise.
# STAT=median (default) compares the median per-iteration time of both sides
# (`--time-stat median` and the loop's median column), which a shared machine
# disturbs far less; STAT=mean compares nccl-tests' mean times.
#
# usage: bench/validate_bench.sh ZAYA_BINARY [OUT_DIR]
#   env: NP (2), ROUNDS (3), TOL (0.10), COMM_MIN (1K), COMM_MAX (64M), ITERS (20),
#        STREAM_ELEMS (50000000: 3 x 400 MB arrays, far beyond the caches), THREADS ("1 2"),
#        STREAM_C (path to McCalpin's stream.c; optional)
set -euo pipefail
ZAYA=$(realpath "${1:?usage: validate_bench.sh ZAYA_BINARY [OUT_DIR]}")
OUT=${2:-$(mktemp -d /tmp/zaya-validate.XXXXXX)}
HERE=$(cd "$(dirname "$0")" && pwd)
NP=${NP:-2} ROUNDS=${ROUNDS:-3} TOL=${TOL:-0.10} ITERS=${ITERS:-20} STAT=${STAT:-median}
COMM_MIN=${COMM_MIN:-1K} COMM_MAX=${COMM_MAX:-64M} STREAM_ELEMS=${STREAM_ELEMS:-50000000} THREADS=${THREADS:-"1 2"}
STREAM_C=${STREAM_C:-}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root -np "$NP")
mkdir -p "$OUT"
mpicc -O2 -o "$OUT/mpi_coll_loop" "$HERE/mpi_coll_loop.c"
cc -O3 -march=native -fopenmp -o "$OUT/stream_ref" "$HERE/stream_ref.c"
if [[ -n $STREAM_C ]]; then
  [[ -f $STREAM_C ]] || { echo "STREAM_C=$STREAM_C: no such file (McCalpin's stream.c)" >&2; exit 2; }
  cc -O3 -march=native -fopenmp -mcmodel=medium -DSTREAM_ARRAY_SIZE="$STREAM_ELEMS" -DNTIMES=11 \
    -o "$OUT/stream_mccalpin" "$STREAM_C"
fi

echo "== all_reduce: zaya bench comm vs plain MPI_Allreduce, $NP ranks, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  OMP_NUM_THREADS=1 "${MPIRUN[@]}" "$ZAYA" bench comm all_reduce -b "$COMM_MIN" -e "$COMM_MAX" -f 4 -n "$ITERS" -w 5 \
    -c 0 --time-stat "$STAT" >"$OUT/zaya_comm.$r.txt"
  for nb in 0 1; do  # MPI_Allreduce as zaya's Comm layer issues it, and MPI_Iallreduce + MPI_Wait
    OMP_NUM_THREADS=1 "${MPIRUN[@]}" "$OUT/mpi_coll_loop" -C all_reduce -b "$COMM_MIN" -e "$COMM_MAX" -f 4 -n "$ITERS" -w 5 \
      -I "$nb" >"$OUT/mpi_loop$([[ $nb == 1 ]] && echo _nb).$r.txt"
  done
done

echo "== STREAM: zaya bench membw vs stream_ref, $STREAM_ELEMS doubles per array"
for t in $THREADS; do
  for r in $(seq "$ROUNDS"); do
    ws=$((STREAM_ELEMS * 24))
    "$ZAYA" bench membw --kernel copy,scale,add,triad --threads "$t" --min-bytes "$ws" --max-bytes "$ws" --reps 10 \
      >"$OUT/zaya_membw.$t.$r.txt" 2>/dev/null
    OMP_NUM_THREADS=$t "$OUT/stream_ref" "$STREAM_ELEMS" 10 >"$OUT/stream_ref.$t.$r.txt"
    if [[ -n $STREAM_C ]]; then OMP_NUM_THREADS=$t "$OUT/stream_mccalpin" >"$OUT/stream_mccalpin.$t.$r.txt"; fi
  done
done

echo "== #wrong: a correct, a dropped-rank and an off-by-one all_reduce, $NP ranks"
for fault in none drop-rank off-by-one; do
  rc=0
  OMP_NUM_THREADS=1 "${MPIRUN[@]}" "$ZAYA" bench comm all_reduce,reduce_scatter,reduce -r $((NP - 1)) -b 1K -e 1M -f 32 -n 2 -w 1 \
    -c 1 --inject-fault "$fault" >"$OUT/fault_$fault.txt" 2>&1 || rc=$?
  echo "$rc" >"$OUT/fault_$fault.rc"
done

python3 - "$OUT" "$ROUNDS" "$TOL" "$THREADS" "$STAT" <<'PY'
import glob, re, statistics, sys
out, rounds, tol, threads, stat = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split(), sys.argv[5]

def verdict(a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    spread = max(max(a) / min(a) - 1, max(b) / min(b) - 1)
    diff = abs(ma / mb - 1)
    return ma, mb, diff, spread, diff <= max(tol, spread)

ok = True
print("\nall_reduce (float sum, out-of-place): %s time per operation in us, median of %d rounds;" % (stat, rounds))
print("the verdict compares zaya with the loop that makes the same MPI call (blocking MPI_Allreduce)")
print("%12s %12s %12s %8s %8s  %-7s %14s" % ("size", "zaya", "Allreduce", "diff", "noise", "verdict", "Iallreduce"))
zaya, ref, nonblocking = {}, {}, {}
for r in range(1, rounds + 1):
    for line in open("%s/zaya_comm.%d.txt" % (out, r)):
        f = line.split()
        if f and f[0].isdigit(): zaya.setdefault(int(f[0]), []).append(float(f[5]))
    for name, table in (("mpi_loop", ref), ("mpi_loop_nb", nonblocking)):
        for line in open("%s/%s.%d.txt" % (out, name, r)):
            f = line.split()
            if f and f[0].isdigit(): table.setdefault(int(f[0]), []).append(float(f[5] if stat == "median" else f[2]))
for size in sorted(zaya):
    ma, mb, diff, spread, good = verdict(zaya[size], ref[size])
    ok &= good
    print("%12d %12.2f %12.2f %7.1f%% %7.1f%%  %-7s %14.2f" % (size, ma, mb, 100 * diff, 100 * spread,
                                                             "agree" if good else "DIFFER",
                                                             statistics.median(nonblocking[size])))

import os
mccalpin = os.path.exists("%s/stream_mccalpin.%s.1.txt" % (out, threads[0]))
refs = ["stream_ref"] + (["STREAM 5.10"] if mccalpin else [])
print("\nSTREAM (best GB/s), median of %d rounds" % rounds)
print("%8s %6s %-11s %10s %10s %8s %8s  %s" % ("threads", "kernel", "reference", "zaya", "reference", "diff", "noise",
                                               "verdict"))
for t in threads:
    z, s, m5 = {}, {}, {}
    for r in range(1, rounds + 1):
        lines = open("%s/zaya_membw.%s.%d.txt" % (out, t, r)).read().splitlines()
        header = next(l for l in lines if l.strip().startswith("working set")).split()[2:]
        values = lines[-1].split()[-len(header):]
        for h, v in zip(header, values): z.setdefault(h.split("/")[0], []).append(float(v))
        for line in open("%s/stream_ref.%s.%d.txt" % (out, t, r)):
            m = re.match(r"(\w+)\s+([\d.]+) GB/s", line)
            if m: s.setdefault(m.group(1), []).append(float(m.group(2)))
        if mccalpin:  # McCalpin's output: "Copy:   <best MB/s> <avg> <min> <max>"
            for line in open("%s/stream_mccalpin.%s.%d.txt" % (out, t, r)):
                m = re.match(r"(Copy|Scale|Add|Triad):\s+([\d.]+)", line)
                if m: m5.setdefault(m.group(1).lower(), []).append(float(m.group(2)) / 1000)
    for k in ("copy", "scale", "add", "triad"):
        for name, ref in zip(refs, (s, m5)):
            ma, mb, diff, spread, good = verdict(z[k], ref[k])
            ok &= good
            print("%8s %6s %-11s %10.2f %10.2f %7.1f%% %7.1f%%  %s" % (t, k, name, ma, mb, 100 * diff, 100 * spread,
                                                                     "agree" if good else "DIFFER"))

print("\n#wrong (all_reduce, reduce_scatter, reduce to the last rank; float sum; 1 check per size and form)")
print("%12s %5s %10s %10s %8s  %s" % ("fault", "exit", "rows", "wrong>0", "max", "verdict"))
for fault in ("none", "drop-rank", "off-by-one"):
    rc = int(open("%s/fault_%s.rc" % (out, fault)).read())
    wrong = []
    for line in open("%s/fault_%s.txt" % (out, fault)):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            wrong += [int(x) for x in (f[8], f[12]) if x.isdigit()]
    bad = sum(1 for w in wrong if w > 0)
    if fault == "none": good = rc == 0 and wrong and bad == 0
    elif fault == "drop-rank": good = rc == 1 and wrong and bad == len(wrong)
    else: good = rc == 1 and wrong and all(w == 1 for w in wrong)  # exactly the one corrupted element
    ok &= bool(good)
    print("%12s %5d %10d %10d %8d  %s" % (fault, rc, len(wrong), bad, max(wrong or [0]), "caught as expected" if good and fault != "none" else ("clean" if good else "UNEXPECTED")))
print("\n%s (raw outputs in %s)" % ("VALIDATION OK" if ok else "VALIDATION: some figures differ beyond the noise", out))
sys.exit(0 if ok else 1)
PY
