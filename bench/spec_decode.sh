#!/usr/bin/env bash
# Speculative decoding side by side with plain decoding, in one run (issue #41):
# zaya generate on the same requests without speculation, with `--spec ngram`
# and (with a draft model) with `--spec-model DRAFT`, at batch 1 and 4, ROUNDS
# rounds in which the three alternate (interleaved A/B: the ratios hold on a
# loaded machine where the absolute rates do not); reports decode tokens/s of
# plain decoding and each method's ratio to it (median over rounds), the
# acceptance rate and tokens per draft step, and checks that greedy texts are
# identical (token for token). For the quoting sets it also says how many
# plain greedy texts copy the quoted text: the short-trained targets this
# script trains by default do not (they loop on their own text, "and the
# LORD, and the LORD", after a passage or a C++ snippet alike), so their
# n-gram rows measure drafting on those loops (docs/inference.md,
# "Speculative decoding"); TARGET_CORPUS=copy (below) trains one that does.
# Four prompt sets: "repetitive" (passages of the bundled corpus quoted twice,
# then their start again: the text a continuation that copies its context
# writes), "code" (snippets of this repository's own C++ source quoted twice,
# then their first line: a code edit), "ordinary" (a passage's start only),
# greedy; and "sampled" (the
# ordinary prompts at temperature 1, top-k 0, top-p 1: n-gram acceptance is
# poor there, and the adaptive K must keep the speed of plain decoding,
# >= 0.95x; the texts differ, their distribution does not).
# Every run passes --ignore-eos (when its binary has it: a ZAYA_BASE built
# before it runs without, and the script says so), so each decodes exactly
# PROMPTS x TOKENS tokens: the sampled rows compare equal work (texts that
# stopped at EOS at different points made the ratio compare texts of
# different lengths, and a batch that ran on with fewer rows), and the greedy
# texts, identical token for token, run to the limit too.
#   bench/spec_decode.sh [MODEL] [ROUNDS]
# Without MODEL, the `small` preset (the target, TARGET_STEPS, default 300) and
# the `tiny` preset (its draft, DRAFT_STEPS, default 600) are trained here on
# data/kjv with one tokenizer (kept for the next run when the steps match),
# at TARGET_SEQ positions (default 512: the benchmark decodes at up to ~530
# positions, its quoted code; a target trained at 128 positions loops
# differently past 128) and DRAFT_SEQ (default TARGET_SEQ), with
# 1024 / SEQ sequences per step (the 1024 tokens per step of 8 x 128).
# TARGET_CORPUS=copy trains the target (in OUT/copy_target, its draft in
# OUT/copy_draft) on bench/copy_corpus.py's corpus instead: the bundled corpus,
# this repository's C++ sources outside src/zaya/infer (whose files the code
# prompts quote) and 6,000 passages and snippets each written twice, for
# TARGET_STEPS (default 4000 here: about 80 minutes on two cores; the corpus
# is drawn once per OUT: delete OUT/copy_target/corpus.txt to draw it again). A target
# trained long enough on it copies what its prompt quotes, so the quoting rows
# measure drafting on quotations (docs/inference.md, "Measured", has the
# target measured and how it was trained).
# DISTILL=N (default 0: off) distils that draft: the target continues N corpus
# passages (none of the benchmark's) greedily for DISTILL_TOKENS (128), and the
# draft trains DISTILL_STEPS (200) more steps on those texts
# (`model.init_from`, the target's tokenizer) at DRAFT_SEQ positions; the
# distilled draft drafts.
# DRAFT: a draft model for MODEL (none: plain and n-gram only). ZAYA: the
# binary (build/zaya); ZAYA_BASE: another binary (e.g. one built before a
# change) whose speculative runs join each round as ngram_base / model_base,
# so old and new are compared in the same rounds; SPEC_ARGS: more flags for
# the speculative runs (e.g. "--spec-tokens 8"); THREADS (1); SETS (the prompt
# sets to run, default "repetitive code ordinary sampled"); OUT (the work
# directory, runs/bench/spec_decode); TRAIN_THREADS (bench/train_tiny.bash).
# "drafting": the share of the decode steps' time spent drafting (last round).
# PROMPTS (16 per set, at most 16) x TOKENS (128): a set decodes for a few
# seconds at batch 1, long enough that one run decides (8 x 96 decoded in
# about 1 s, and single rounds then varied by 15%).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-} rounds=${2:-3}
zaya=${ZAYA:-build/zaya}
threads=${THREADS:-1}
tokens=${TOKENS:-128}
prompts=${PROMPTS:-16}
((prompts >= 1 && prompts <= 16)) || { echo "PROMPTS=$prompts: allowed 1..16" >&2; exit 2; }
draft=${DRAFT:-}
dir=${OUT:-runs/bench/spec_decode}
target_seq=${TARGET_SEQ:-512}
draft_seq=${DRAFT_SEQ:-$target_seq}
for seq in "$target_seq" "$draft_seq"; do
  ((seq >= 8 && seq <= 1024 && 1024 % seq == 0)) || { echo "TARGET_SEQ/DRAFT_SEQ=$seq: allowed a divisor of 1024, 8..1024" >&2; exit 2; }
done
mkdir -p "$dir"
# shellcheck source=bench/train_tiny.bash
source bench/train_tiny.bash
distill_draft() {  # distill_draft TARGET DRAFT DIR PROMPTS TOKENS STEPS
  local target=$1 draft=$2 out=$3 n=$4 new_tokens=$5 steps=$6 tok
  local stamp="$target $draft $n $new_tokens $steps $draft_seq"
  if [[ -f $out/run/final/config.json && $(cat "$out/trained" 2>/dev/null) == "$stamp" ]]; then
    echo "reusing $out/run/final (distilled draft)"
    return
  fi
  tok=$target/tokenizer.model
  [[ -f $tok ]] || { echo "DISTILL: $tok not found (the target's tokenizer)" >&2; exit 2; }
  mkdir -p "$out/data"
  # N passage starts spread over the corpus, none within 20 lines of a benchmark prompt (lines 1000 + 2000 i,
  # i < 16: every PROMPTS setting's).
  python3 - "$out/prompts.jsonl" "$n" <<'PY2'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
lines = [l.strip() for l in open("data/kjv/kjv.txt", encoding="utf-8") if l.strip()]
bench = {1000 + 2000 * i for i in range(16)}
cand = [i for i in range(len(lines)) if len(lines[i].split()) >= 12 and all(abs(i - b) > 20 for b in bench)]
with open(out, "w") as f:
    for k in range(n):
        i = cand[k * len(cand) // n]
        f.write(json.dumps({"prompt": " ".join(lines[i].split()[:12])}) + "\n")
PY2
  "$zaya" generate --model "$target" --prompts "$out/prompts.jsonl" --max-new-tokens "$new_tokens" --temperature 0 \
    --batch 16 --threads "$threads" >"$out/continuations.jsonl"
  # One document per prompt: the prompt and the target's continuation.
  python3 - "$out/continuations.jsonl" "$out/corpus.txt" <<'PY2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for r in rows:
        doc = "\n".join(line for line in (r["prompt"] + r["completion"]).splitlines() if line.strip())
        f.write(doc + "\n\n")
PY2
  "$zaya" data shards --corpus "$out/corpus.txt" --tokenizer "$tok" --out "$out/data" --val-fraction 0.05 --quiet >/dev/null
  cp "$tok" "$out/data/tokenizer.model"
  train_preset "$out" "${DRAFT_PRESET:-tiny}" "$steps" "$draft_seq" 0 "$out/data" "$draft" $((1024 / draft_seq))
  echo "$stamp" >"$out/trained"
}
train_once() {  # train_once DIR PRESET STEPS SEQ [DATA_DIR [INIT_FROM]]: train_preset unless DIR has that run
  local stamp="$2 $3 ${5:-} ${6:-} $4"
  if [[ -f $1/run/final/config.json && $(cat "$1/trained" 2>/dev/null) == "$stamp" ]]; then
    echo "reusing $1/run/final ($2, $3 steps)"
    return
  fi
  rm -f "$dir"/{draft,copy_draft,distill}/trained  # what starts from this run is stale now
  train_preset "$1" "$2" "$3" "$4" 0 "${5:-}" "${6:-}" $((1024 / $4))
  echo "$stamp" >"$1/trained"
}
copy_corpus() {  # copy_corpus FILE: bench/copy_corpus.py's corpus, drawn once
  # Kept across runs (the sources it draws from change with every commit; retraining the target for that would
  # take hours): delete FILE to draw it again from the current tree.
  [[ -f $1 ]] && return
  rm -f "$(dirname "$1")/trained"  # a target trained on another corpus is stale
  python3 bench/copy_corpus.py "$1.new" >/dev/null
  mv "$1.new" "$1"
}
if [[ -z $model ]]; then
  case ${TARGET_CORPUS:-kjv} in
    kjv)
      train_once "$dir/target" small "${TARGET_STEPS:-300}" "$target_seq"
      train_once "$dir/draft" tiny "${DRAFT_STEPS:-600}" "$draft_seq" "$dir/target/data"
      model=$dir/target/run/final draft=$dir/draft/run/final ;;
    copy)
      mkdir -p "$dir/copy_target"
      copy_corpus "$dir/copy_target/corpus.txt"
      TRAIN_CORPUS=$dir/copy_target/corpus.txt train_once "$dir/copy_target" small "${TARGET_STEPS:-4000}" "$target_seq"
      train_once "$dir/copy_draft" tiny "${DRAFT_STEPS:-600}" "$draft_seq" "$dir/copy_target/data"
      model=$dir/copy_target/run/final draft=$dir/copy_draft/run/final ;;
    *) echo "TARGET_CORPUS=$TARGET_CORPUS: allowed kjv, copy" >&2; exit 2 ;;
  esac
fi
if ((${DISTILL:-0} > 0)); then
  [[ -n $draft ]] || { echo "DISTILL needs a draft model (DRAFT, or no MODEL)" >&2; exit 2; }
  distill_draft "$model" "$draft" "$dir/distill" "$DISTILL" "${DISTILL_TOKENS:-128}" "${DISTILL_STEPS:-200}"
  draft=$dir/distill/run/final
fi
methods=(plain ngram)
[[ -n $draft ]] && methods+=(model)
if [[ -n ${ZAYA_BASE:-} ]]; then
  methods+=(ngram_base)
  [[ -n $draft ]] && methods+=(model_base)
fi
# Prompts: PROMPTS passages of the corpus (lines 1000, 3000, ...) and PROMPTS snippets of
# code (the first 8 code lines of the first PROMPTS sources of src/zaya/infer), as JSON lines.
python3 - "$dir" "$prompts" <<'PY'
import glob, json, sys
d, n = sys.argv[1], int(sys.argv[2])
lines = [l.strip() for l in open("data/kjv/kjv.txt", encoding="utf-8") if l.strip()]
rep, plain, code = [], [], []
quoted = {"repetitive": [], "code": []}
for i in range(n):
    passage = " ".join(lines[1000 + 2000 * i: 1003 + 2000 * i])
    start = " ".join(passage.split()[:12])
    rep.append({"prompt": passage + "\n" + passage + "\n" + start})
    plain.append({"prompt": start})
    quoted["repetitive"].append(passage[len(start):])
sources = sorted(f for f in glob.glob("src/zaya/infer/*.cc") if not f.endswith("_test.cc"))[:n]
for f in sources:
    body = [l.rstrip() for l in open(f, encoding="utf-8")
            if l.strip() and not l.lstrip().startswith(("//", "#"))][:8]
    snippet = "\n".join(body)
    code.append({"prompt": snippet + "\n\n" + snippet + "\n\n" + body[0] + "\n"})
    quoted["code"].append("\n".join(body[1:]))
for name, rows in (("repetitive", rep), ("ordinary", plain), ("code", code)):
    with open(f"{d}/{name}.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
for name, rows in quoted.items():  # what a continuation that copies its prompt writes next
    with open(f"{d}/{name}.quoted.json", "w") as f:
        json.dump(rows, f)
PY
# --ignore-eos for each binary that has it (a baseline built before it has not).
has_ignore_eos() { [[ $("$1" generate --help 2>&1 || true) == *--ignore-eos* ]]; }
eos_zaya=() eos_base=()
has_ignore_eos "$zaya" && eos_zaya=(--ignore-eos)
if [[ -n ${ZAYA_BASE:-} ]]; then
  has_ignore_eos "$ZAYA_BASE" && eos_base=(--ignore-eos)
  ((${#eos_base[@]} == ${#eos_zaya[@]})) ||
    echo "note: only one of $zaya and $ZAYA_BASE has --ignore-eos: the *_base runs stop at EOS where the others do not"
fi
run() {  # run PROMPTS BATCH METHOD OUT
  local name=$1 batch=$2 method=${3%_base} out=$4 prompts=$1 sampling=(--temperature 0) spec=() bin=$zaya
  local eos=("${eos_zaya[@]}")
  [[ $3 == *_base ]] && bin=$ZAYA_BASE eos=("${eos_base[@]}")
  [[ $name == sampled ]] && prompts=ordinary sampling=(--temperature 1 --top-k 0 --top-p 1 --seed 5)
  # shellcheck disable=SC2206
  case $method in
    ngram) spec=(--spec ngram ${SPEC_ARGS:-}) ;;
    model) spec=(--spec-model "$draft" ${SPEC_ARGS:-}) ;;
  esac
  "$bin" generate --model "$model" --prompts "$dir/$prompts.jsonl" --max-new-tokens "$tokens" "${sampling[@]}" \
    --batch "$batch" --threads "$threads" --json "$out.json" "${eos[@]}" "${spec[@]}" >"$out.txt"
}
echo "== $model${draft:+ (draft $draft)}, $rounds rounds, threads $threads, $prompts prompts x $tokens tokens"
sets=${SETS:-repetitive code ordinary sampled}
for name in $sets; do
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
python3 - "$dir" "$rounds" "$sets" "${methods[@]}" <<'PY'
import json, statistics, sys
d, rounds, sets, methods = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[5:]
def rate(j):
    return j["decode_tokens"] / j["decode_seconds"]
head = f"{'prompts':<11} {'batch':>5} {'plain tok/s':>12}"
for m in methods:
    head += f" | {m + ' ratio':>11} {'accept':>7} {'tok/draft':>9} {'drafts':>6} {'drafted':>7} {'kept':>5} {'tokens':>6} {'drafting':>8}"
print(head)
print("(drafts, drafted and kept tokens and decode tokens: the last round's run)")
for name in sets:
    for batch in (1, 4):
        load = lambda m, r: json.load(open(f"{d}/{m}_{name}_b{batch}_r{r}.json"))
        plain = [rate(load("plain", r)) for r in range(1, rounds + 1)]
        row = f"{name:<11} {batch:>5} {statistics.median(plain):>12.1f}"
        for m in methods:
            ratios = [rate(load(m, r)) / plain[r - 1] for r in range(1, rounds + 1)]
            j = load(m, rounds)
            sp = j["spec"]
            # The drafting's share of the decode steps' time (a binary without draft_seconds: -).
            share = f"{100 * sp['draft_seconds'] / j['decode_seconds']:.1f}%" if "draft_seconds" in sp else "-"
            row += f" | {statistics.median(ratios):>10.2f}x {100 * sp['acceptance_rate']:>6.1f}% " \
                   f"{sp['mean_accepted_length']:>9.2f} {sp['drafts']:>6} {sp['drafted_tokens']:>7} " \
                   f"{sp['accepted_tokens']:>5} {j['decode_tokens']:>6} {share:>8}"
        print(row)
# Whether the target copies what its prompt quotes: plain greedy continuations (batch 1, round 1) whose first
# 8 words are the quoted text's next 8. A target that does not (a model trained a few hundred steps loops on
# its own text instead) makes the quoting rows measure drafting on its loops, not on quotations.
for name in sets:
    if name not in ("repetitive", "code"):
        continue
    quoted = json.load(open(f"{d}/{name}.quoted.json"))
    done = [json.loads(l)["completion"] for l in open(f"{d}/plain_{name}_b1_r1.txt")]
    copied = sum(c.split()[:8] == q.split()[:8] for c, q in zip(done, quoted))
    print(f"{name}: {copied} of {len(done)} plain greedy texts copy the quoted text (first 8 words)")
PY
echo "greedy texts identical in every run"
