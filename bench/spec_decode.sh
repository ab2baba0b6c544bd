#!/usr/bin/env bash
# Speculative decoding side by side with plain decoding, in one run (issue #41):
# zaya generate on the same requests without speculation, with `--spec ngram`
# and (with a draft model) with `--spec-model DRAFT`, at batch 1 and 4, ROUNDS
# rounds in which the three alternate (interleaved A/B: the ratios hold on a
# loaded machine where the absolute rates do not); reports decode tokens/s of
# plain decoding and each method's ratio to it (median over rounds), the
# acceptance rate and tokens per draft step, and checks that greedy texts are
# identical (token for token).
# Three prompt sets: "repetitive" (passages of the bundled corpus quoted twice,
# then their start again: the text a continuation copies) and "ordinary" (a
# passage's start only), greedy; and "sampled" (the ordinary prompts at
# temperature 1, top-k 0, top-p 1: n-gram acceptance is poor there, and the
# adaptive K must keep the speed of plain decoding, >= 0.95x; the texts differ,
# their distribution does not).
#   bench/spec_decode.sh [MODEL] [ROUNDS]
# Without MODEL, the `small` preset (the target, TARGET_STEPS, default 300) and
# the `tiny` preset (its draft, DRAFT_STEPS, default 600) are trained here on
# data/kjv with one tokenizer. DRAFT: a draft model for MODEL (none: plain and
# n-gram only). ZAYA: the binary (build/zaya); SPEC_ARGS: more flags for the
# speculative runs (e.g. "--spec-tokens 8"); THREADS (1); TOKENS (96 per request).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-} rounds=${2:-3}
zaya=${ZAYA:-build/zaya}
threads=${THREADS:-1}
tokens=${TOKENS:-96}
draft=${DRAFT:-}
dir=runs/bench/spec_decode
mkdir -p "$dir"
# shellcheck source=bench/train_tiny.bash
source bench/train_tiny.bash
if [[ -z $model ]]; then
  train_preset "$dir/target" small "${TARGET_STEPS:-300}" 128
  train_preset "$dir/draft" tiny "${DRAFT_STEPS:-600}" 128 0 "$dir/target/data"
  model=$dir/target/run/final draft=$dir/draft/run/final
fi
methods=(plain ngram)
[[ -n $draft ]] && methods+=(model)
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
run() {  # run PROMPTS BATCH METHOD OUT
  local name=$1 batch=$2 method=$3 out=$4 prompts=$1 sampling=(--temperature 0) spec=()
  [[ $name == sampled ]] && prompts=ordinary sampling=(--temperature 1 --top-k 0 --top-p 1 --seed 5)
  # shellcheck disable=SC2206
  case $method in
    ngram) spec=(--spec ngram ${SPEC_ARGS:-}) ;;
    model) spec=(--spec-model "$draft" ${SPEC_ARGS:-}) ;;
  esac
  "$zaya" generate --model "$model" --prompts "$dir/$prompts.jsonl" --max-new-tokens "$tokens" "${sampling[@]}" \
    --batch "$batch" --threads "$threads" --json "$out.json" "${spec[@]}" >"$out.txt"
}
echo "== $model${draft:+ (draft $draft)}, $rounds rounds, threads $threads, $tokens tokens per request"
for name in repetitive ordinary sampled; do
  for batch in 1 4; do
    for r in $(seq "$rounds"); do
      for m in "${methods[@]}"; do
        run "$name" "$batch" "$m" "$dir/${m}_${name}_b${batch}_r$r"
        [[ $name == sampled || $m == plain ]] ||
          cmp -s "$dir/plain_${name}_b${batch}_r$r.txt" "$dir/${m}_${name}_b${batch}_r$r.txt" ||
          { echo "FAIL: $name batch $batch round $r: --spec $m text differs from plain"; exit 1; }
      done
    done
  done
done
python3 - "$dir" "$rounds" "${methods[@]}" <<'PY'
import json, statistics, sys
d, rounds, methods = sys.argv[1], int(sys.argv[2]), sys.argv[4:]
def rate(j):
    return j["decode_tokens"] / j["decode_seconds"]
head = f"{'prompts':<11} {'batch':>5} {'plain tok/s':>12}"
for m in methods:
    head += f" | {m + ' ratio':>11} {'accept':>7} {'tok/draft':>9}"
print(head)
for name in ("repetitive", "ordinary", "sampled"):
    for batch in (1, 4):
        load = lambda m, r: json.load(open(f"{d}/{m}_{name}_b{batch}_r{r}.json"))
        plain = [rate(load("plain", r)) for r in range(1, rounds + 1)]
        row = f"{name:<11} {batch:>5} {statistics.median(plain):>12.1f}"
        for m in methods:
            ratios = [rate(load(m, r)) / plain[r - 1] for r in range(1, rounds + 1)]
            sp = load(m, rounds)["spec"]
            row += f" | {statistics.median(ratios):>10.2f}x {100 * sp['acceptance_rate']:>6.1f}% " \
                   f"{sp['mean_accepted_length']:>9.2f}"
        print(row)
PY
echo "greedy texts identical in every run"
