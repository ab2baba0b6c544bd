#!/usr/bin/env bash
# The Comm layer against the MPI library, per collective and size, side by
# side in one run (issue [comm]; docs/bench.md, "The Comm layer against plain
# MPI"): `zaya bench comm C` (the Comm calls the trainer makes), `zaya bench
# comm C --raw` (the same harness calling MPI directly) and the plain C loop
# bench/mpi_coll_loop.c, alternating, ROUNDS times each; per size the best
# (lowest) median-iteration time of each side. Prints busbw ratios to the
# loop and checks the targets: zaya within 5% of the loop from 64 KiB up and
# within 20% below (ratio = loop time / zaya time = zaya busbw / loop busbw).
#
# usage: bench/comm_vs_mpi.sh ZAYA_BINARY [OUT_DIR]
#   env: NP (2), ROUNDS (3), ITERS (10), WARMUP (2), MIN (1K), MAX (256M), FACTOR (4),
#        COLLS ("all_reduce reduce_scatter all_gather broadcast all_to_all_v"),
#        MPICC (mpicc), MPIRUN ("mpirun --oversubscribe --allow-run-as-root"; MPICH: "mpiexec.mpich")
#   e.g. MPICC=mpicc.mpich MPIRUN=mpiexec.mpich bench/comm_vs_mpi.sh build/zaya-mpich
set -euo pipefail
ZAYA=$(realpath "${1:?usage: comm_vs_mpi.sh ZAYA_BINARY [OUT_DIR]}")
OUT=${2:-$(mktemp -d /tmp/zaya-comm-vs-mpi.XXXXXX)}
HERE=$(cd "$(dirname "$0")" && pwd)
NP=${NP:-2} ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-10} WARMUP=${WARMUP:-2} MIN=${MIN:-1K} MAX=${MAX:-256M} FACTOR=${FACTOR:-4}
COLLS=${COLLS:-"all_reduce reduce_scatter all_gather broadcast all_to_all_v"}
MPICC=${MPICC:-mpicc}
read -r -a MPIRUN <<<"${MPIRUN:-mpirun --oversubscribe --allow-run-as-root}"
[[ ${MPIRUN[0]} == *mpich* ]] || export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
export OMP_NUM_THREADS=1
mkdir -p "$OUT"
"$MPICC" -O2 -o "$OUT/mpi_coll_loop" "$HERE/mpi_coll_loop.c"
sizes=(-b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP")
run_side() {  # SIDE COLLECTIVE ROUND
  case $1 in
    zaya) "${MPIRUN[@]}" -np "$NP" "$ZAYA" bench comm "$2" "${sizes[@]}" -c 0 --time-stat median --json "$OUT/zaya.$2.$3.json" >/dev/null ;;
    loop) "${MPIRUN[@]}" -np "$NP" "$OUT/mpi_coll_loop" -C "$2" "${sizes[@]}" >"$OUT/loop.$2.$3.txt" ;;
    raw) "${MPIRUN[@]}" -np "$NP" "$ZAYA" bench comm "$2" "${sizes[@]}" -c 0 --time-stat median --raw --json "$OUT/raw.$2.$3.json" >/dev/null ;;
  esac
}
# The order of the three sides rotates from round to round, so no side always
# runs first or right after another (an order effect of about 10% was seen).
orders=("zaya loop raw" "loop raw zaya" "raw zaya loop")
for r in $(seq "$ROUNDS"); do
  for c in $COLLS; do
    order=${orders[$(((r - 1) % 3))]}
    echo "== round $r: $c ($order)"
    for side in $order; do run_side "$side" "$c" "$r"; done
  done
done
python3 - "$OUT" "$ROUNDS" "$COLLS" <<'PY'
import json, sys
out, rounds, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def zaya(path):  # size -> median time (us); broadcast has only the in-place form
    run = json.load(open(path))["runs"][0]
    return {row["size"]: (row["out_of_place"] or row["in_place"])["time_us"] for row in run["rows"]}

def loop(path):
    rows = [l.split() for l in open(path) if l.strip() and not l.startswith("#")]
    return {int(r[0]): float(r[5]) for r in rows}

def best(kind, c, read):
    b = {}
    for r in range(1, rounds + 1):
        for size, t in read(f"{out}/{kind}.{c}.{r}.{'txt' if kind == 'loop' else 'json'}").items():
            b[size] = min(t, b.get(size, float("inf")))
    return b

def human(n):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f: return f"{n / f:g} {unit}"
    return f"{n} B"

failed = 0
print(f"\nbest of {rounds} alternating rounds, median-iteration time in us; ratio = loop time / time (= busbw ratio)")
for c in colls:
    z, w, l = best("zaya", c, zaya), best("raw", c, zaya), best("loop", c, loop)
    print(f"\n{c}\n| size | MPI loop | zaya bench comm | --raw | zaya / loop | raw / loop | target | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sorted(l):
        if size not in z: continue
        rz, rw = l[size] / z[size], l[size] / w[size]
        target = 0.95 if size >= 64 << 10 else 0.80
        ok = rz >= target
        failed += not ok
        print(f"| {human(size)} | {l[size]:.2f} | {z[size]:.2f} | {w[size]:.2f} | {rz:.3f} | {rw:.3f} | "
              f">= {target:.2f} | {'ok' if ok else 'SLOWER'} |")
print(f"\n{failed} size(s) below target")
sys.exit(1 if failed else 0)
PY
