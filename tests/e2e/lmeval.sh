#!/usr/bin/env bash
# lm-evaluation-harness against zaya serve, end to end: its `local-completions`
# model (pinned in scripts/python-requirements.txt, from the cached environment
# of scripts/python-env.sh), with the remote tokenizer backend it picks on its
# own from the server's /tokenizer_info and /tokenize (no Hugging Face
# tokenizer, nothing downloaded: the HF_*_OFFLINE variables below), runs the
# project's two tasks (tests/lmeval: a multiple-choice and a generate-until
# task from the bundled corpus) on a small model trained here, and
#  - its multiple-choice acc and acc_norm equal `zaya eval --mc`'s on the same
#    items, and so does every item's prediction;
#  - each of its generations equals `zaya generate`'s greedy text for the same
#    prompt, cut at the first of the task's stop strings.
# The committed items are what tests/lmeval/make_items.py writes.
source "$(dirname "$0")/common.bash" "$@"
TASKS=$SRC/tests/lmeval

# --- the items are the generator's ---
python3 "$TASKS/make_items.py" "$SRC/data/kjv/kjv.txt" "$WORK"
for f in zaya_kjv_mc.jsonl zaya_kjv_gen.jsonl; do
  cmp -s "$WORK/$f" "$TASKS/$f" || fail "tests/lmeval/$f differs from what make_items.py writes: run it again"
done

# --- the pinned Python environment (made once, then cached) ---
PYTHON=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
LMEVAL_VERSION=$("$PYTHON" -c 'import lm_eval, importlib.metadata as m; print(m.version("lm_eval"))') ||
  fail "lm_eval is not in the pinned environment"

# --- a small model ---
prepare_data 512
write_config train.toml 40
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
M=$WORK/run/final

# --- zaya eval's multiple-choice accuracy on the same items ---
"$ZAYA" eval --model "$M" --threads 2 --mc "$TASKS/zaya_kjv_mc.jsonl" --json "$WORK/eval.json" \
  --per-item "$WORK/items.jsonl" >"$WORK/eval.txt"
echo "zaya eval: $(grep 'multiple choice' "$WORK/eval.txt")"

# --- zaya serve on a free loopback port; always stopped ---
KEY=lmeval-key
start_serve "$KEY" "$M" --batch 4 --threads 2 --request-timeout 120
CONTEXT=$(curl -sf -H "Authorization: Bearer $KEY" "$URL/tokenizer_info" | jq -r .model_max_length) ||
  fail "/tokenizer_info did not answer"

# --- lm_eval: nothing fetched, no Hugging Face tokenizer, the remote tokenizer found on its own ---
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 HF_HOME=$WORK/hf
export HF_DATASETS_CACHE=$WORK/hf/datasets TOKENIZERS_PARALLELISM=false OPENAI_API_KEY=$KEY
start=$(date +%s)
"$PYTHON" -m lm_eval --model local-completions \
  --model_args "model=zaya,base_url=$URL/v1/completions,auth_token=$KEY,max_length=$CONTEXT,max_retries=1,timeout=120" --batch_size 8 \
  --tasks zaya_kjv_mc,zaya_kjv_gen --include_path "$TASKS" --output_path "$WORK/lmeval" --log_samples \
  >"$WORK/lmeval.log" 2>&1 || fail "lm_eval failed: $(tail -40 "$WORK/lmeval.log")"
grep -q "Auto-detected remote tokenizer support" "$WORK/lmeval.log" ||
  fail "lm_eval did not pick the remote tokenizer: $(grep -i tokenizer "$WORK/lmeval.log" | head)"
echo "ok: lm_eval $LMEVAL_VERSION ran both tasks in $(($(date +%s) - start)) s with the server's tokenizer"

# --- zaya generate's greedy texts for the generate-until prompts, cut at the task's stop strings ---
jq -c '{prompt: .context, id: .id}' "$TASKS/zaya_kjv_gen.jsonl" >"$WORK/gen_prompts.jsonl"
"$ZAYA" generate --model "$M" --threads 2 --prompts "$WORK/gen_prompts.jsonl" --max-new-tokens 16 --temperature 0 \
  --stop $'\n' --stop . >"$WORK/generate.jsonl"

# --- the harness's numbers against zaya's ---
"$PYTHON" - "$WORK" "$WORK/lmeval" <<'PY' || fail "lm_eval's results differ from zaya's (above)"
import glob, json, sys
work, out = sys.argv[1], sys.argv[2]

def one(pattern):
    files = glob.glob(f"{out}/**/{pattern}", recursive=True)
    assert len(files) == 1, f"expected one {pattern} under {out}, found {files}"
    return files[0]

def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]

results = json.load(open(one("results_*.json")))["results"]
harness = results["zaya_kjv_mc"]
zaya = json.load(open(f"{work}/eval.json"))["multiple_choice"][0]
bad = []
for metric in ("acc", "acc_norm"):
    if harness[f"{metric},none"] != zaya[metric]:
        bad.append(f"{metric}: lm_eval {harness[metric + ',none']} != zaya eval {zaya[metric]}")

# Item by item: the same prediction, greediness and (to float32's precision) log-likelihoods.
items = {r["id"]: r for r in lines(f"{work}/items.jsonl")}
samples = lines(one("samples_zaya_kjv_mc_*.jsonl"))
assert len(samples) == len(items) == zaya["items"], (len(samples), len(items))
worst = 0.0
for s in samples:
    z = items[s["doc"]["id"]]
    lls = [float(r[0]) for r in s["filtered_resps"]]
    greedy = [r[1] == "True" for r in s["filtered_resps"]]
    pred = max(range(len(lls)), key=lambda k: (lls[k], -k))
    worst = max(worst, max(abs(a - b) / abs(b) for a, b in zip(lls, z["logprobs"])))
    if pred != z["pred"] or greedy != z["greedy"] or s["acc"] != float(z["pred"] == z["gold"]):
        bad.append(f"item {z['id']}: lm_eval {lls} {greedy} (pred {pred}), zaya eval {z['logprobs']} "
                   f"{z['greedy']} (pred {z['pred']})")
if worst > 1e-5:
    bad.append(f"log-likelihoods differ by up to {worst:.2e} (relative) from zaya eval's")

# The generate-until task: each generation is zaya generate's greedy text, cut at the first stop string.
want = {r["id"]: r["completion"] for r in lines(f"{work}/generate.jsonl")}
gens = lines(one("samples_zaya_kjv_gen_*.jsonl"))
assert len(gens) == len(want), (len(gens), len(want))
for s in gens:
    got = s["filtered_resps"][0] if isinstance(s["filtered_resps"], list) else s["filtered_resps"]
    if got != want[s["doc"]["id"]]:
        bad.append(f"generation {s['doc']['id']}: lm_eval {got!r}, zaya generate {want[s['doc']['id']]!r}")
nonempty = sum(1 for t in want.values() if t)
for b in bad:
    print("FAIL:", b, file=sys.stderr)
if bad:
    sys.exit(1)
print(f"ok: zaya_kjv_mc: lm_eval acc {harness['acc,none']:.4f} acc_norm {harness['acc_norm,none']:.4f} == zaya eval's, "
      f"{len(samples)} items' predictions equal, log-likelihoods within {worst:.1e} relative")
print(f"ok: zaya_kjv_gen: {len(gens)} generations ({nonempty} non-empty) == zaya generate's greedy text; "
      f"exact_match {results['zaya_kjv_gen']['exact_match,none']:.3f}")
PY
