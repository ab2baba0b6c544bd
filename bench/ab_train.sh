#!/usr/bin/env bash
# Training throughput of two zaya binaries side by side: `zaya bench train`
# on the same preset and shape, alternating A and B so that both see the same
# machine (this 2-core VM is noisy), best and median of RUNS each.
#
#   bench/ab_train.sh OLD_ZAYA NEW_ZAYA [RUNS] [-- extra bench train flags]
#   e.g. bench/ab_train.sh /tmp/zaya-before build/zaya 5 -- --preset small --threads 2
set -euo pipefail
a=$1 b=$2 runs=${3:-5}
shift $(( $# >= 3 ? 3 : $# ))
[[ ${1:-} == -- ]] && shift
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(--preset small --micro-batch 8 --seq-len 256 --steps 8 --warmup 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$runs"); do
  for side in a b; do
    bin=$a
    [[ $side == b ]] && bin=$b
    "$bin" bench train "${flags[@]}" --json "$tmp/$side-$i.json" >/dev/null
  done
done
python3 - "$tmp" "$runs" "$a" "$b" <<'PY'
import json, statistics, sys
tmp, runs, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
res = {}
for side in "ab":
    tps = [json.load(open(f"{tmp}/{side}-{i}.json"))["tokens_per_second"] for i in range(1, runs + 1)]
    res[side] = tps
    name = a if side == "a" else b
    print(f"{side} {name}: tokens/s best {max(tps):.0f}, median {statistics.median(tps):.0f}, all {[round(t) for t in tps]}")
print(f"b / a: best {max(res['b']) / max(res['a']):.3f}, median {statistics.median(res['b']) / statistics.median(res['a']):.3f}")
PY
