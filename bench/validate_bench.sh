#!/usr/bin/env bash
# Validates `zaya bench comm` and `zaya bench membw` against independent
# programs (docs/bench.md, "Validation"):
#   all_reduce: zaya bench comm vs a plain MPI_Allreduce loop (mpi_allreduce_loop.c)
#   membw:      zaya bench membw vs a plain C STREAM build (stream_ref.c)
# Each side runs ROUNDS times, alternating, and the medians are compared; a
# size "agrees" when the medians differ by less than the larger of TOL and the
# spread (max/min - 1) of either side's rounds, i.e. within the noise.
#
# usage: bench/validate_bench.sh ZAYA_BINARY [OUT_DIR]
#   env: NP (2), ROUNDS (3), TOL (0.10), COMM_MIN (1K), COMM_MAX (64M), ITERS (20),
#        STREAM_ELEMS (50000000: 3 x 400 MB arrays, far beyond the caches), THREADS ("1 2")
set -euo pipefail
ZAYA=$(realpath "${1:?usage: validate_bench.sh ZAYA_BINARY [OUT_DIR]}")
OUT=${2:-$(mktemp -d /tmp/zaya-validate.XXXXXX)}
HERE=$(cd "$(dirname "$0")" && pwd)
NP=${NP:-2} ROUNDS=${ROUNDS:-3} TOL=${TOL:-0.10} ITERS=${ITERS:-20}
COMM_MIN=${COMM_MIN:-1K} COMM_MAX=${COMM_MAX:-64M} STREAM_ELEMS=${STREAM_ELEMS:-50000000} THREADS=${THREADS:-"1 2"}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root -np "$NP")
mkdir -p "$OUT"
mpicc -O2 -o "$OUT/mpi_allreduce_loop" "$HERE/mpi_allreduce_loop.c"
cc -O3 -march=native -fopenmp -o "$OUT/stream_ref" "$HERE/stream_ref.c"

echo "== all_reduce: zaya bench comm vs plain MPI_Allreduce, $NP ranks, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  OMP_NUM_THREADS=1 "${MPIRUN[@]}" "$ZAYA" bench comm all_reduce -b "$COMM_MIN" -e "$COMM_MAX" -f 4 -n "$ITERS" -w 5 \
    -c 0 >"$OUT/zaya_comm.$r.txt"
  OMP_NUM_THREADS=1 "${MPIRUN[@]}" "$OUT/mpi_allreduce_loop" -b "$COMM_MIN" -e "$COMM_MAX" -f 4 -n "$ITERS" -w 5 \
    >"$OUT/mpi_loop.$r.txt"
done

echo "== STREAM: zaya bench membw vs stream_ref, $STREAM_ELEMS doubles per array"
for t in $THREADS; do
  for r in $(seq "$ROUNDS"); do
    ws=$((STREAM_ELEMS * 24))
    "$ZAYA" bench membw --kernel copy,scale,add,triad --threads "$t" --min-bytes "$ws" --max-bytes "$ws" --reps 10 \
      >"$OUT/zaya_membw.$t.$r.txt" 2>/dev/null
    OMP_NUM_THREADS=$t "$OUT/stream_ref" "$STREAM_ELEMS" 10 >"$OUT/stream_ref.$t.$r.txt"
  done
done

python3 - "$OUT" "$ROUNDS" "$TOL" "$THREADS" <<'PY'
import glob, re, statistics, sys
out, rounds, tol, threads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split()

def verdict(a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    spread = max(max(a) / min(a) - 1, max(b) / min(b) - 1)
    diff = abs(ma / mb - 1)
    return ma, mb, diff, spread, diff <= max(tol, spread)

ok = True
print("\nall_reduce (float sum, out-of-place): time per operation in us, median of %d rounds" % rounds)
print("%12s %12s %12s %8s %8s  %s" % ("size", "zaya", "MPI loop", "diff", "noise", "verdict"))
zaya, ref = {}, {}
for r in range(1, rounds + 1):
    for line in open("%s/zaya_comm.%d.txt" % (out, r)):
        f = line.split()
        if f and f[0].isdigit(): zaya.setdefault(int(f[0]), []).append(float(f[5]))
    for line in open("%s/mpi_loop.%d.txt" % (out, r)):
        f = line.split()
        if f and f[0].isdigit(): ref.setdefault(int(f[0]), []).append(float(f[2]))
for size in sorted(zaya):
    ma, mb, diff, spread, good = verdict(zaya[size], ref[size])
    ok &= good
    print("%12d %12.2f %12.2f %7.1f%% %7.1f%%  %s" % (size, ma, mb, 100 * diff, 100 * spread, "agree" if good else "DIFFER"))

print("\nSTREAM (best GB/s), median of %d rounds" % rounds)
print("%8s %6s %10s %10s %8s %8s  %s" % ("threads", "kernel", "zaya", "stream_ref", "diff", "noise", "verdict"))
for t in threads:
    z, s = {}, {}
    for r in range(1, rounds + 1):
        lines = open("%s/zaya_membw.%s.%d.txt" % (out, t, r)).read().splitlines()
        header = next(l for l in lines if l.strip().startswith("working set")).split()[2:]
        values = lines[-1].split()[-len(header):]
        for h, v in zip(header, values): z.setdefault(h.split("/")[0], []).append(float(v))
        for line in open("%s/stream_ref.%s.%d.txt" % (out, t, r)):
            m = re.match(r"(\w+)\s+([\d.]+) GB/s", line)
            if m: s.setdefault(m.group(1), []).append(float(m.group(2)))
    for k in ("copy", "scale", "add", "triad"):
        ma, mb, diff, spread, good = verdict(z[k], s[k])
        ok &= good
        print("%8s %6s %10.2f %10.2f %7.1f%% %7.1f%%  %s" % (t, k, ma, mb, 100 * diff, 100 * spread, "agree" if good else "DIFFER"))
print("\n%s (raw outputs in %s)" % ("VALIDATION OK" if ok else "VALIDATION: some figures differ beyond the noise", out))
sys.exit(0 if ok else 1)
PY
