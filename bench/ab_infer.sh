#!/usr/bin/env bash
# Decode throughput of two zaya binaries side by side, the sibling of
# bench/ab_train.sh: `zaya bench infer` on the same preset and points,
# alternating A and B round by round so that both see the same machine (this
# 2-core VM is noisy), best and median of RUNS each, per point: prefill
# tokens/s and decode tokens/s at each (batch, context), and their ratio B / A.
#
# With AB_GENERATE set, each round also runs a fixed `zaya generate` with
# those flags (a model directory and its requests: the whole path through
# the batch scheduler, sampling and text) and compares its decode tokens/s
# and its total tokens/s (prompt and generated tokens over the whole run);
# the two binaries' outputs must be byte-identical, or the script fails.
#
#   bench/ab_infer.sh OLD_ZAYA NEW_ZAYA [RUNS] [-- extra bench infer flags]
#   e.g. bench/ab_infer.sh /tmp/zaya-old/build/zaya build/zaya 6 -- --preset small --threads 1
#   AB_GENERATE="--model DIR --prompts reqs.jsonl --batch 4" bench/ab_infer.sh OLD NEW 4 -- --preset small
set -euo pipefail
a=$1 b=$2 runs=${3:-5}
shift $(( $# >= 3 ? 3 : $# ))
[[ ${1:-} == -- ]] && shift
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] ||
  flags=(--preset small --prefill 512 --batch 1 8 --context 1024 --decode-steps 16 --no-working-set --threads 1)
read -r -a gen <<<"${AB_GENERATE:-}"
for bin in "$a" "$b"; do [[ -x $bin ]] || { echo "ab_infer.sh: $bin is not an executable" >&2; exit 2; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$runs"); do
  for side in a b; do
    bin=$a
    [[ $side == b ]] && bin=$b
    "$bin" bench infer "${flags[@]}" --json "$tmp/$side-$i.json" >/dev/null
    if [[ ${#gen[@]} -gt 0 ]]; then
      "$bin" generate "${gen[@]}" --json "$tmp/$side-gen-$i.json" >"$tmp/$side-gen-$i.out"
      cmp -s "$tmp/a-gen-1.out" "$tmp/$side-gen-$i.out" ||
        { echo "ab_infer.sh: zaya generate output of $bin (round $i) differs from $a's" >&2; exit 1; }
    fi
  done
done
python3 - "$tmp" "$runs" "$a" "$b" "${#gen[@]}" <<'PY'
import json, os, statistics, sys
tmp, runs, a, b, gen = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]) > 0

def load(side, i, kind=""):
    return json.load(open(f"{tmp}/{side}{kind}-{i}.json"))

# Per point: (label, function of one run's JSON -> tokens/s).
first = load("a", 1)
points = [(f"prefill {p['tokens']} tokens", lambda j, k=k: j["prefill"][k]["tokens_per_second"])
          for k, p in enumerate(first["prefill"])]
points += [(f"decode batch {p['batch']} context {p['context']}", lambda j, k=k: j["decode"][k]["tokens_per_second"])
           for k, p in enumerate(first["decode"])]
runs_of = {side: [load(side, i) for i in range(1, runs + 1)] for side in "ab"}
if gen:
    gruns = {side: [load(side, i, "-gen") for i in range(1, runs + 1)] for side in "ab"}
    points.append(("generate decode", "decode"))
    points.append(("generate total", "total"))

def values(side, point):
    label, f = point
    if f == "decode":
        return [g["decode_tokens"] / g["decode_seconds"] for g in gruns[side]]
    if f == "total":
        return [(g["prompt_tokens"] + g["generated_tokens"]) / g["total_seconds"] for g in gruns[side]]
    return [f(j) for j in runs_of[side]]

print(f"a = {a}\nb = {b}\n{runs} alternating rounds; tokens/s (best, median)")
print(f"{'point':34} {'a best':>10} {'b best':>10} {'b/a best':>9} {'a median':>10} {'b median':>10} {'b/a med':>8}")
for point in points:
    va, vb = values("a", point), values("b", point)
    print(f"{point[0]:34} {max(va):10.1f} {max(vb):10.1f} {max(vb) / max(va):9.3f} "
          f"{statistics.median(va):10.1f} {statistics.median(vb):10.1f} "
          f"{statistics.median(vb) / statistics.median(va):8.3f}")
print(f"load average at the end: {os.getloadavg()[0]:.2f}")
PY
