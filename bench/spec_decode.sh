#!/usr/bin/env bash
# Speculative decoding side by side with plain decoding, in one run (issue #41):
# zaya generate, greedy, the same requests with and without `--spec ngram`, at
# batch 1 and 4, ROUNDS alternating rounds; reports decode tokens/s of each
# and their ratio (median round), the acceptance rate and tokens per draft
# step, and checks that the texts are identical (greedy: token for token).
# Three runs: "repetitive" (passages of the bundled corpus quoted twice, then
# their start again: the text a continuation copies) and "ordinary" (a
# passage's start only), greedy, whose texts must be identical; and
# "sampled" (the ordinary prompts at temperature 1, top-k 0, top-p 1: the
# acceptance is poor there, and the adaptive K must keep the speed of plain
# decoding, >= 0.95x; the texts differ, their distribution does not).
#   bench/spec_decode.sh [MODEL] [ROUNDS]
# Without MODEL a `tiny` model is trained here on data/kjv (STEPS, default 200).
# ZAYA: the binary (build/zaya); SPEC_ARGS: more flags for the speculative runs
# (e.g. "--spec-tokens 8"); THREADS (1).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-} rounds=${2:-3}
zaya=${ZAYA:-build/zaya}
threads=${THREADS:-1}
dir=runs/bench/spec_decode
mkdir -p "$dir"
# shellcheck source=bench/train_tiny.bash
source bench/train_tiny.bash
if [[ -z $model ]]; then
  train_tiny "$dir" "${STEPS:-200}" 128
  model=$dir/run/final
fi
# Prompts: 8 passages of the corpus (lines 1000, 3000, ...), as JSON lines.
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
lines = [l.strip() for l in open("data/kjv/kjv.txt", encoding="utf-8") if l.strip()]
rep, plain = [], []
for i in range(8):
    passage = " ".join(lines[1000 + 2000 * i: 1003 + 2000 * i])
    start = " ".join(passage.split()[:12])
    rep.append({"prompt": passage + "\n" + passage + "\n" + start})
    plain.append({"prompt": start})
for name, rows in (("repetitive", rep), ("ordinary", plain)):
    with open(f"{d}/{name}.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
PY
run() {  # run NAME BATCH OUT [flags...]
  local name=$1 batch=$2 out=$3 prompts=$1 sampling=(--temperature 0)
  shift 3
  [[ $name == sampled ]] && prompts=ordinary sampling=(--temperature 1 --top-k 0 --top-p 1 --seed 5)
  "$zaya" generate --model "$model" --prompts "$dir/$prompts.jsonl" --max-new-tokens 96 "${sampling[@]}" \
    --batch "$batch" --threads "$threads" --json "$out.json" "$@" >"$out.txt"
}
echo "== $model, $rounds rounds, threads $threads"
for name in repetitive ordinary sampled; do
  for batch in 1 4; do
    for r in $(seq "$rounds"); do
      run "$name" "$batch" "$dir/plain_${name}_b${batch}_r$r"
      # shellcheck disable=SC2086
      run "$name" "$batch" "$dir/spec_${name}_b${batch}_r$r" --spec ngram ${SPEC_ARGS:-}
      [[ $name == sampled ]] || cmp -s "$dir/plain_${name}_b${batch}_r$r.txt" "$dir/spec_${name}_b${batch}_r$r.txt" ||
        { echo "FAIL: $name batch $batch round $r: speculative text differs from plain"; exit 1; }
    done
  done
done
python3 - "$dir" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'prompts':<11} {'batch':>5} {'plain tok/s':>12} {'spec tok/s':>11} {'ratio':>6} {'accept':>7} {'tok/draft':>9}")
for name in ("repetitive", "ordinary", "sampled"):
    for batch in (1, 4):
        p, s, ratios = [], [], []
        for r in range(1, rounds + 1):
            a = json.load(open(f"{d}/plain_{name}_b{batch}_r{r}.json"))
            b = json.load(open(f"{d}/spec_{name}_b{batch}_r{r}.json"))
            p.append(a["decode_tokens"] / a["decode_seconds"])
            s.append(b["decode_tokens"] / b["decode_seconds"])
            ratios.append(s[-1] / p[-1])
        sp = b["spec"]
        print(f"{name:<11} {batch:>5} {statistics.median(p):>12.1f} {statistics.median(s):>11.1f} "
              f"{statistics.median(ratios):>6.2f} {100 * sp['acceptance_rate']:>6.1f}% {sp['mean_accepted_length']:>9.2f}")
PY
echo "greedy texts identical in every run"
