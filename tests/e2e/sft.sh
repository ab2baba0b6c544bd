#!/usr/bin/env bash
# Supervised fine-tuning end to end: `zaya data sft` turns chat JSONL into
# shards with loss masks (bad examples named FILE: line N, or skipped and
# counted), and a full fine-tuning run from an imported checkpoint in the
# released native layout with bf16 weights on disk (configs/sft-tiny.toml with
# its paths overridden) measurably learns a templated task: "reverse: A B C"
# -> "C B A" over 10 words, exact-match accuracy on held-out word triples
# (never in the training data) from about 0% before to well above chance
# (1 in 1000) after; the result exports back to the native layout and still
# answers. The loss counts only the assistant's tokens (metrics.jsonl's
# loss_tokens), and `zaya eval` on the validation split counts the same ones:
# its loss is training's validation loss of the same weights (--no-loss-mask:
# every token).
source "$(dirname "$0")/common.bash" "$@"

python3 - "$WORK" <<'PY'
import itertools, json, random, sys
work = sys.argv[1]
words = ["God", "earth", "light", "water", "day", "night", "king", "land", "son", "heaven"]
triples = list(itertools.product(words, repeat=3))
random.Random(7).shuffle(triples)
held_out, seen = triples[:100], triples[100:]
rng = random.Random(8)
with open(f"{work}/chat.jsonl", "w") as f:
    for i in range(3000):
        t = rng.choice(seen)
        ex = {"messages": [{"role": "user", "content": "reverse: " + " ".join(t)},
                           {"role": "assistant", "content": " ".join(reversed(t))}]}
        if i % 50 == 0:
            ex["system"] = "Answer with the words only."
            ex["messages"] = [ex["messages"][0], ex["messages"][1]]
        f.write(json.dumps(ex) + "\n")
# Held-out prompts as the chat template renders a user turn and the generation prompt.
with open(f"{work}/prompts.jsonl", "w") as p, open(f"{work}/answers.txt", "w") as a:
    for i, t in enumerate(held_out):
        text = "<start_of_turn>user\nreverse: " + " ".join(t) + "<end_of_turn>\n<start_of_turn>model\n"
        p.write(json.dumps({"id": i, "prompt": text}) + "\n")
        a.write(" ".join(reversed(t)) + "\n")
PY
"$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --vocab-size 512 --max-sentences 20000 --out "$WORK/tok" >/dev/null

# Bad examples are named by file and line; --skip-bad counts them.
cp "$WORK/chat.jsonl" "$WORK/bad.jsonl"
sed -i '3s/.*/{"messages": [{"role": "assistant", "content": "x"}]}/; 5s/.*/{"prompt": "a"}/' "$WORK/bad.jsonl"
expect_error 1 "bad.jsonl: line 3: messages\[0\].role is \"assistant\" where \"user\" is expected.*--skip-bad" -- \
  "$ZAYA" data sft --corpus "$WORK/bad.jsonl" --tokenizer "$WORK/tok.model" --out "$WORK/bad" --quiet
"$ZAYA" data sft --corpus "$WORK/bad.jsonl" --tokenizer "$WORK/tok.model" --out "$WORK/bad" --quiet --skip-bad \
  >"$WORK/bad.log"
grep -q "skipped 2 bad records (--skip-bad); the first: .*bad.jsonl: line 3" "$WORK/bad.log" || fail "skip-bad: $(cat "$WORK/bad.log")"
expect_error 2 "--loss-on everything is invalid; allowed: assistant, last-assistant, all" -- \
  "$ZAYA" data sft --corpus "$WORK/chat.jsonl" --tokenizer "$WORK/tok.model" --out "$WORK/x" --loss-on everything

"$ZAYA" data sft --corpus "$WORK/chat.jsonl" --tokenizer "$WORK/tok.model" --out "$WORK/sft" --quiet \
  --val-fraction 0.05 >"$WORK/sft.log"
cat "$WORK/sft.log"
grep -q "loss on assistant" "$WORK/sft.log" || fail "no summary line"
for f in train.bin train.idx train.mask val.bin val.idx val.mask; do
  [[ -f $WORK/sft/$f ]] || fail "zaya data sft wrote no $f"
done

# The imported checkpoint: a random tiny model (one step at a negligible
# learning rate) in the native layout with bf16 weights, its balancing biases
# set so that the skip expert never wins (what the native layout can express).
# max_position_embeddings is raised (RoPE: no weight depends on it) so that
# one training window can hold the whole validation split (below).
base_run=(--set model.num_blocks=2 --set model.max_position_embeddings=16384 --set data.dir="$WORK/sft"
  --set data.tokenizer="$WORK/tok.model")
"$ZAYA" train --config "$SRC/configs/sft-tiny.toml" "${base_run[@]}" --set model.init_from='""' \
  --set train.steps=1 --set schedule.warmup_steps=0 --set optim.lr=1e-9 --set train.out_dir="$WORK/base" --quiet >/dev/null
python3 - "$WORK/base/final/model.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    for name, t in header.items():
        if name.endswith("balancing_biases"):
            slots = t["shape"][0]
            f.seek(8 + n + t["data_offsets"][0])
            f.write(struct.pack("<%df" % slots, *([0.5] * (slots - 1) + [-1.0])))
PY
"$ZAYA" ckpt export --in "$WORK/base/final" --out "$WORK/base-native" --layout native --dtype bf16 >/dev/null
head -c 4096 "$WORK/base-native/model.safetensors" | grep -aEq '"dtype": *"BF16"' ||
  fail "the imported checkpoint is not bf16 on disk"

# accuracy MODEL: exact matches of the greedy answers to the held-out prompts, in percent.
accuracy() {
  "$ZAYA" generate --model "$1" --prompts "$WORK/prompts.jsonl" --temperature 0 --max-new-tokens 24 \
    --stop "<end_of_turn>" --batch 20 >"$WORK/answers.jsonl" 2>/dev/null
  python3 - "$WORK/answers.jsonl" "$WORK/answers.txt" <<'PY'
import json, sys
got = [json.loads(l)["completion"].split("<")[0].strip() for l in open(sys.argv[1])]  # up to <end_of_turn>
want = [l.strip() for l in open(sys.argv[2])]
assert len(got) == len(want) == 100, (len(got), len(want))
print(sum(g == w for g, w in zip(got, want)))
PY
}
before=$(accuracy "$WORK/base-native")

"$ZAYA" train --config "$SRC/configs/sft-tiny.toml" "${base_run[@]}" --set model.init_from="$WORK/base-native" \
  --set train.steps=240 --set optim.lr=3e-3 --set schedule.warmup_steps=20 --set train.eval_every=80 \
  --set train.out_dir="$WORK/run" >"$WORK/run.log" 2>&1 || { cat "$WORK/run.log"; fail "fine-tuning run"; }
grep -q "starting from the weights of $WORK/base-native" "$WORK/run.log" || fail "no init_from line"
grep -q '"loss_tokens":' "$WORK/run/metrics.jsonl" || fail "metrics.jsonl has no loss_tokens (the mask was not used)"

# zaya eval on the validation split scores the targets its loss mask selects,
# each document alone. The run's own validation loss is not that number: its
# 128-token windows run the documents together without document masking, cut
# most of them in two, and wrap round the split. Training's validation of the
# same weights over what eval scores: one step at a negligible learning rate
# from run/final (no balancing update) with document masking and one window
# holding the whole split (seq_len = its tokens - 1).
val_tokens=$(($(stat -c %s "$WORK/sft/val.bin") / 4))
"$ZAYA" train --config "$SRC/configs/sft-tiny.toml" "${base_run[@]}" --set model.init_from="$WORK/run/final" \
  --set data.document_masking=true --set train.seq_len=$((val_tokens - 1)) --set train.micro_batch=1 \
  --set train.eval_batches=1 --set train.steps=1 --set optim.lr=1e-9 --set schedule.warmup_steps=0 \
  --set moe.balance=false --set train.out_dir="$WORK/valpass" --quiet >/dev/null
last_val() { grep -o '"val_loss":[0-9.e+-]*' "$1" | tail -1 | cut -d: -f2; }
train_val=$(last_val "$WORK/valpass/metrics.jsonl")
run_val=$(last_val "$WORK/run/metrics.jsonl")
"$ZAYA" eval --model "$WORK/run/final" --shards "$WORK/sft/val" --json "$WORK/eval.json" | tee "$WORK/eval.txt"
"$ZAYA" eval --model "$WORK/run/final" --shards "$WORK/sft/val" --json "$WORK/eval_full.json" --no-loss-mask |
  tee "$WORK/eval_full.txt"
in_loss=$(grep -o "val [0-9]* examples / $val_tokens tokens ([0-9]* in the loss)" "$WORK/sft.log" | grep -o '([0-9]*' | tr -d '(')
[[ -n $in_loss ]] || fail "no val split of $val_tokens tokens in the summary: $(cat "$WORK/sft.log")"
grep -q "sft/val (shards): .* $in_loss tokens scored (loss mask $WORK/sft/val.mask: $in_loss of $val_tokens tokens selected)" \
  "$WORK/eval.txt" || fail "eval does not report the loss mask ($in_loss of $val_tokens tokens): $(cat "$WORK/eval.txt")"
grep -q "tokens scored (loss mask $WORK/sft/val.mask ignored: --no-loss-mask)" "$WORK/eval_full.txt" ||
  fail "eval --no-loss-mask: $(cat "$WORK/eval_full.txt")"
python3 - "$WORK/eval.json" "$WORK/eval_full.json" "$train_val" "$in_loss" "$val_tokens" "$WORK/sft/val.mask" <<'PY' ||
import json, sys
masked, full = (json.load(open(p))["perplexity"][0] for p in sys.argv[1:3])
train_val, in_loss, val_tokens = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
assert masked["loss_mask"] == {"file": sys.argv[6], "applied": True, "selected": in_loss,
                               "document_tokens": val_tokens}, masked["loss_mask"]
assert masked["tokens"] == in_loss, masked  # no example selects its bos: every selected token is a target
assert full["loss_mask"]["applied"] is False and full["tokens"] == val_tokens - full["documents"], full
# metrics.jsonl keeps 6 decimals; the forwards differ in float rounding only.
assert abs(masked["loss"] - train_val) <= 1e-4, (masked["loss"], train_val)
assert full["loss"] > masked["loss"] + 0.5, (full["loss"], masked["loss"])  # the prompts' random words count there
PY
  fail "zaya eval on the validation split vs training's validation loss $train_val"
echo "validation loss: zaya eval $(grep -o '"loss": *[0-9.]*' "$WORK/eval.json" | head -1 | grep -o '[0-9.]*$') over $in_loss" \
  "selected targets, training's validation of the same weights and targets $train_val (the run's own, other" \
  "windows: $run_val); every token (--no-loss-mask): $(grep -o '"loss": *[0-9.]*' "$WORK/eval_full.json" | head -1 | grep -o '[0-9.]*$')"

after=$(accuracy "$WORK/run/final")
"$ZAYA" ckpt export --in "$WORK/run/final" --out "$WORK/export" --layout native --dtype bf16 >/dev/null
exported=$(accuracy "$WORK/export")
echo "held-out exact match: before ${before}%, after ${after}% (native bf16 export: ${exported}%); chance 0.1%"
((before <= 5)) || fail "the untrained model already answers ${before}% of the held-out prompts"
((after >= 50)) || fail "fine-tuning reached only ${after}% on the held-out prompts"
((exported >= after - 10)) || fail "the native bf16 export answers ${exported}%, the run's final/ ${after}%"
echo "ok: sft"
