#!/usr/bin/env bash
# Distributed training time of two zaya binaries side by side (issue [comm]):
# `zaya bench train` on 2 ranks, dp 2 and ep 2, alternating A and B RUNS times
# each, and per side the best step time with the share of it spent in exposed
# communication (gradient reduction left after the backward pass + parameter
# all-gather + expert all-to-all, rank 0) and the gradient reduction in flight
# during the backward pass (overlapped).
#
#   bench/comm_train_ab.sh OLD_ZAYA NEW_ZAYA [RUNS] [-- extra bench train flags]
#   e.g. bench/comm_train_ab.sh /tmp/zaya-before build/zaya 3
set -euo pipefail
a=$(realpath "$1") b=$(realpath "$2") runs=${3:-3}
shift $(($# >= 3 ? 3 : $#))
[[ ${1:-} == -- ]] && shift
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(--preset tiny --micro-batch 4 --seq-len 256 --grad-accum 2 --steps 4 --warmup 1)
export OMP_NUM_THREADS=1 OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root -np 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$runs"); do
  for ep in 1 2; do
    for side in a b; do
      bin=$a
      [[ $side == b ]] && bin=$b
      "${MPIRUN[@]}" "$bin" bench train "${flags[@]}" --threads 1 --set "parallel.ep=$ep" \
        --json "$tmp/$side-ep$ep-$i.json" >/dev/null
    done
  done
done
python3 - "$tmp" "$runs" "$a" "$b" <<'PY'
import json, sys
tmp, runs, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"a = {a}\nb = {b}\nbest of {runs} alternating runs, rank 0, seconds per step")
print("| layout | side | step | compute | exposed comm | exposed share | grad reduce exposed | in flight (overlapped) | param gather | expert all-to-all | every run's step |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for ep in (1, 2):
    for side in "ab":
        every = [json.load(open(f"{tmp}/{side}-ep{ep}-{i}.json")) for i in range(1, runs + 1)]
        best = min(every, key=lambda d: d["step_seconds"])
        r0 = best["ranks"][0]
        steps = " ".join("%.2f" % d["step_seconds"] for d in every)
        exposed = r0["grad_reduce_exposed_seconds"] + r0["param_gather_seconds"] + r0["expert_exchange_seconds"]
        step = best["step_seconds"]
        print(f"| dp {best['dp']} x ep {best['ep']} | {side} | {step:.3f} | {step - exposed:.3f} | {exposed:.3f} | "
              f"{100 * exposed / step:.1f}% | {r0['grad_reduce_exposed_seconds']:.3f} | "
              f"{r0['grad_reduce_overlapped_seconds']:.3f} | {r0['param_gather_seconds']:.3f} | "
              f"{r0['expert_exchange_seconds']:.3f} | {steps} |")
PY
