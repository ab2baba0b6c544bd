#!/usr/bin/env bash
# LoRA fine-tuning (docs/training.md "LoRA"): a tiny base model trains, a LoRA
# run on its final/ learns (loss falls) with the base frozen, writes a PEFT
# adapter, and resumes bit for bit; `zaya generate --lora` (unmerged) gives
# the tokens of the merged model (`zaya ckpt export --lora`); a damaged adapter
# and a dp 2 x ep 2 LoRA run are covered too (router and expert targets:
# tests/e2e/lora_moe.sh).
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 30
"$ZAYA" train --config "$WORK/base.toml" --quiet >/dev/null
BASE=$WORK/run/final

# The LoRA run: 12 steps from the base, checkpoints every 6.
sed '/^out_dir/d' "$WORK/base.toml" >"$WORK/lora.toml"
cat >>"$WORK/lora.toml" <<TOML
[optim]
lr = 0.01
[checkpoint]
every = 6
[lora]
rank = 4
alpha = 8
dropout = 0.05
TOML
sed -i "/^\[model\]$/a init_from = \"$BASE\"" "$WORK/lora.toml"
sed -i 's/^steps = 30$/steps = 12/' "$WORK/lora.toml"
"$ZAYA" train --config "$WORK/lora.toml" --set train.out_dir="$WORK/lora" >"$WORK/lora.log" 2>&1 ||
  { cat "$WORK/lora.log"; fail "LoRA run"; }
grep -q "saved the LoRA adapter to $WORK/lora/adapter" "$WORK/lora.log" || fail "no line naming the adapter"
ADAPTER=$WORK/lora/adapter
[[ -f $ADAPTER/adapter_config.json && -f $ADAPTER/adapter_model.safetensors ]] || fail "no PEFT adapter files"
python3 - "$ADAPTER/adapter_config.json" <<'PY' || fail "adapter_config.json is not PEFT's"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["peft_type"] == "LORA" and c["r"] == 4 and c["lora_alpha"] == 8, c
assert c["target_modules"] == ["q_proj", "k_proj", "v_proj_current", "v_proj_delayed", "o_proj"], c
PY
first=$(losses "$WORK/lora/metrics.jsonl" | head -1) last=$(losses "$WORK/lora/metrics.jsonl" | tail -1)
echo "LoRA loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "the LoRA run did not learn ($first -> $last)"
grep -q '^\[lora\]$' "$WORK/lora/config.toml" || fail "config.toml lacks [lora]"

# The header counts what trains: the adapter file's floats, of base + adapters (red-team L17).
trainable=$(grep -o "trainable [0-9]* of [0-9.]*[KM] ([0-9.]*%); the base is frozen" "$WORK/lora.log" | cut -d' ' -f2)
[[ -n $trainable ]] || fail "no trainable-parameter count in the header: $(head -5 "$WORK/lora.log")"
python3 - "$ADAPTER/adapter_model.safetensors" "$trainable" <<'PY' || fail "the header's trainable count is not the adapter's"
import json, math, struct, sys
with open(sys.argv[1], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
n = sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")
assert n == int(sys.argv[2]), (n, sys.argv[2])
PY
# Validation before the first update is the base model's (B = 0): the base run's last validation loss.
val0=$(grep -o '{"step":0,"val_loss":[0-9.]*' "$WORK/lora/metrics.jsonl" | cut -d: -f3)
base_val=$(grep -o '"val_loss":[0-9.]*' "$WORK/run/metrics.jsonl" | tail -1 | cut -d: -f2)
grep -Eq "^step +0/12 \| val [0-9.]+ \(before the first update\)" "$WORK/lora.log" || fail "no step-0 validation line"
awk -v a="$val0" -v b="$base_val" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-4 && d > -1e-4) }' ||
  fail "step-0 validation $val0 is not the base's $base_val"
grep -Eq "^done: 12 steps, train loss [0-9.]+ \(mean of steps 1-2\) -> [0-9.]+ \(steps 11-12\)" "$WORK/lora.log" ||
  fail "summary: $(grep done: "$WORK/lora.log")"
echo "ok: LoRA header: $trainable trainable; step-0 validation $val0 == the base's $base_val"

# configs/lora-tiny.toml (the example for the main job's model) runs as shipped, pointed at this test's base.
"$ZAYA" train --config "$SRC/configs/lora-tiny.toml" --set model.num_blocks=2 --set model.init_from="$BASE" \
  --set data.dir="$WORK/data" --set data.tokenizer="$WORK/data/tokenizer.model" --set train.steps=2 \
  --set schedule.warmup_steps=1 --set train.eval_every=1 --set train.eval_batches=1 --set train.out_dir="$WORK/lora-tiny" >"$WORK/lora-tiny.log" 2>&1 ||
  fail "configs/lora-tiny.toml: $(cat "$WORK/lora-tiny.log")"
[[ -f $WORK/lora-tiny/adapter/adapter_model.safetensors ]] || fail "configs/lora-tiny.toml wrote no adapter"

# Resume: stop at 5 (a logged step), resume, same curve and the same adapter bit for bit.
"$ZAYA" train --config "$WORK/lora.toml" --quiet --set train.out_dir="$WORK/split" --stop-at 5 >/dev/null
"$ZAYA" train --config "$WORK/lora.toml" --quiet --set train.out_dir="$WORK/split" --resume >/dev/null
curve() { grep -o '"loss":[0-9.e+-]*\|"grad_norm":[0-9.e+-]*' "$1"; }
diff <(curve "$WORK/lora/metrics.jsonl") <(curve "$WORK/split/metrics.jsonl") >/dev/null ||
  fail "the resumed LoRA run's loss curve differs"
cmp -s "$ADAPTER/adapter_model.safetensors" "$WORK/split/adapter/adapter_model.safetensors" ||
  fail "the resumed LoRA run's adapter differs"
echo "ok: a LoRA run resumes bit for bit"

# train.precision = "bf16": the frozen base held in bf16 only (no float32 copy, no base gradients); it learns
# from the same base and resumes bit for bit as well.
bf16=(--set train.precision=bf16)
"$ZAYA" train --config "$WORK/lora.toml" --quiet "${bf16[@]}" --set train.out_dir="$WORK/bf16" >/dev/null
first=$(grep -o '"loss":[0-9.e+-]*' "$WORK/bf16/metrics.jsonl" | head -1 | cut -d: -f2)
last=$(grep -o '"loss":[0-9.e+-]*' "$WORK/bf16/metrics.jsonl" | tail -1 | cut -d: -f2)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "the bf16 LoRA run did not learn ($first -> $last)"
"$ZAYA" train --config "$WORK/lora.toml" --quiet "${bf16[@]}" --set train.out_dir="$WORK/bf16_split" --stop-at 5 \
  >/dev/null
"$ZAYA" train --config "$WORK/lora.toml" --quiet "${bf16[@]}" --set train.out_dir="$WORK/bf16_split" --resume >/dev/null
diff <(curve "$WORK/bf16/metrics.jsonl") <(curve "$WORK/bf16_split/metrics.jsonl") >/dev/null ||
  fail "the resumed bf16 LoRA run's loss curve differs"
cmp -s "$WORK/bf16/adapter/adapter_model.safetensors" "$WORK/bf16_split/adapter/adapter_model.safetensors" ||
  fail "the resumed bf16 LoRA run's adapter differs"
echo "ok: a LoRA run on a frozen bf16 base learns ($first -> $last) and resumes bit for bit"

# Unmerged (--lora) and merged (ckpt export --lora) generate the same tokens, and not the base's.
gen() { "$ZAYA" generate --model "$1" --prompt "And God said" --max-new-tokens 24 --temperature 0 "${@:2}"; }
gen "$BASE" --lora "$ADAPTER" >"$WORK/unmerged.txt" 2>/dev/null
"$ZAYA" ckpt export --in "$BASE" --lora "$ADAPTER" --out "$WORK/merged" >"$WORK/export.log"
grep -q "LoRA adapter $ADAPTER merged" "$WORK/export.log" || fail "ckpt export does not say the adapter was merged"
gen "$WORK/merged" >"$WORK/merged.txt" 2>/dev/null
gen "$BASE" >"$WORK/base.txt" 2>/dev/null
diff "$WORK/unmerged.txt" "$WORK/merged.txt" || fail "generate --lora differs from the merged model"
echo "ok: generate --lora == the merged model: $(head -c 120 "$WORK/merged.txt")"
"$ZAYA" ckpt export --in "$BASE" --lora "$ADAPTER" --out "$WORK/merged_native" --layout native >/dev/null
gen "$WORK/merged_native" >"$WORK/merged_native.txt" 2>/dev/null
diff "$WORK/unmerged.txt" "$WORK/merged_native.txt" || fail "the native-layout merged model differs"
head -c 3000 "$SRC/data/kjv/kjv.txt" >"$WORK/held_out.txt"
ppl() { "$ZAYA" eval --model "$1" --text "$WORK/held_out.txt" --json "$WORK/eval.json" "${@:2}" >/dev/null 2>&1 &&
  grep -o '"loss": *[0-9.e+-]*' "$WORK/eval.json" | head -1; }
lora_loss=$(ppl "$BASE" --lora "$ADAPTER") || fail "eval --lora"
merged_loss=$(ppl "$WORK/merged") || fail "eval of the merged model"
base_loss=$(ppl "$BASE") || fail "eval of the base model"
# --lora runs the adapter unmerged, x W^T + s (x A^T) B^T, which rounds
# differently from the merged (W + s B A): equal to float32 noise, and not the base.
close() { python3 -c "import sys; a, b, tol = map(float, sys.argv[1:]); sys.exit(abs(a - b) > tol * abs(b))" "$@"; }
num() { echo "${1##*:}"; }
close "$(num "$lora_loss")" "$(num "$merged_loss")" 1e-6 ||
  fail "eval --lora ($lora_loss) differs from the merged model ($merged_loss)"
! close "$(num "$lora_loss")" "$(num "$base_loss")" 1e-5 ||
  fail "eval --lora ($lora_loss) is the base model's: the adapter was not applied"
echo "ok: eval --lora == the merged model to float32 noise ($lora_loss, merged $merged_loss; the base: $base_loss)"
# int8 base matrices with the adapter beside them (it cannot be merged into int8).
int8_lora=$(ppl "$BASE" --dtype int8 --lora "$ADAPTER") || fail "eval --dtype int8 --lora"
int8_base=$(ppl "$BASE" --dtype int8) || fail "eval --dtype int8"
close "$(num "$int8_lora")" "$(num "$lora_loss")" 0.01 ||
  fail "eval --dtype int8 --lora ($int8_lora) is not within 1% of --lora ($lora_loss)"
! close "$(num "$int8_lora")" "$(num "$int8_base")" 1e-5 ||
  fail "eval --dtype int8 --lora ($int8_lora) is the int8 base's: the adapter was not applied"
echo "ok: eval --dtype int8 --lora $int8_lora (--lora $lora_loss, int8 base $int8_base)"

# Bad adapters name the file and what is expected.
mkdir -p "$WORK/bad" && cp "$ADAPTER"/* "$WORK/bad/"
sed -i 's/"r": 4/"r": 8/' "$WORK/bad/adapter_config.json"
expect_error 1 "adapter_model.safetensors.*lora_A.weight.*shape" -- gen "$BASE" --lora "$WORK/bad"
expect_error 1 "cannot read LoRA adapter config '$WORK/nothing/adapter_config.json'" -- gen "$BASE" --lora "$WORK/nothing"
expect_error 2 "lora.targets = .*allowed: a non-empty list of distinct names out of q_proj" -- \
  "$ZAYA" train --config "$WORK/lora.toml" --quiet --set 'lora.targets=["gate_proj"]' --set train.out_dir="$WORK/x"

# dp 2 x ep 2: the adapters' gradients are reduced like the dense weights', so
# the same global batch (8 sequences) gives the single rank's losses.
if command -v mpirun >/dev/null; then
  short=(--quiet --set train.steps=4 --set train.log_every=1 --set schedule.warmup_steps=1 --set lora.dropout=0.0)
  "$ZAYA" train --config "$WORK/lora.toml" "${short[@]}" --set train.out_dir="$WORK/one" >/dev/null
  "${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/lora.toml" "${short[@]}" --set parallel.ep=2 \
    --set train.micro_batch=2 --set train.out_dir="$WORK/mesh" >"$WORK/mesh.log" 2>&1 ||
    { cat "$WORK/mesh.log"; fail "LoRA on 4 ranks"; }
  [[ -f $WORK/mesh/adapter/adapter_model.safetensors ]] || fail "the 4-rank LoRA run wrote no adapter"
  paste <(losses "$WORK/one/metrics.jsonl") <(losses "$WORK/mesh/metrics.jsonl") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-3 || NF != 2) bad = 1; n++ } END { exit bad || n != 4 }' ||
    fail "LoRA on dp 2 x ep 2 does not follow the single rank: $(paste <(losses "$WORK/one/metrics.jsonl") <(losses "$WORK/mesh/metrics.jsonl"))"
  echo "ok: LoRA on dp 2 x ep 2 follows the single rank"
fi
echo "ok: lora"
