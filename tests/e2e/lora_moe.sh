#!/usr/bin/env bash
# LoRA on the router's matrices and the experts (docs/training.md "LoRA"):
# a run with every target kind learns on a frozen tiny base and writes the
# PEFT layout (target_modules and target_parameters, the experts' pairs
# nested as PEFT's ParamWrapper saves them); `zaya generate --lora` (unmerged)
# gives the merged model's tokens, `eval --lora` its loss (also beside int8
# matrices); dropout with expert targets is refused by name; a checkpoint
# reshaped for dp 2 x ep 2 comes back bit for bit; dp 2 x ep 2 follows one rank.
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 30
"$ZAYA" train --config "$WORK/base.toml" --quiet >/dev/null
BASE=$WORK/run/final

sed '/^out_dir/d' "$WORK/base.toml" >"$WORK/lora.toml"
cat >>"$WORK/lora.toml" <<TOML
[optim]
lr = 0.01
[checkpoint]
every = 6
[lora]
rank = 4
alpha = 8
targets = ["q_proj", "o_proj", "mlp.gate.down_proj", "mlp.gate.router_mlp.fc1", "mlp.gate.router_mlp.fc2",
           "mlp.gate.router_mlp.out_proj", "mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
TOML
sed -i "/^\[model\]$/a init_from = \"$BASE\"" "$WORK/lora.toml"
sed -i 's/^steps = 30$/steps = 12/' "$WORK/lora.toml"

expect_error 2 "lora.dropout = 0.5 is not allowed here: dropout must be 0 with expert targets" -- \
  "$ZAYA" train --config "$WORK/lora.toml" --quiet --set lora.dropout=0.5 --set train.out_dir="$WORK/x"
"$ZAYA" train --config "$WORK/lora.toml" --quiet --set train.out_dir="$WORK/moe" >/dev/null
MOE=$WORK/moe/adapter
python3 - "$MOE" <<'PY' || fail "the router and expert adapter is not in PEFT's layout"
import json, struct, sys
c = json.load(open(sys.argv[1] + "/adapter_config.json"))
assert c["target_modules"] == ["q_proj", "o_proj", "mlp.gate.down_proj", "mlp.gate.router_mlp.fc1",
                               "mlp.gate.router_mlp.fc2", "mlp.gate.router_mlp.out_proj"], c
assert c["target_parameters"] == ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"], c
assert c["lora_dropout"] == 0, c
raw = open(sys.argv[1] + "/adapter_model.safetensors", "rb").read()
h = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
E, r, D, F = 4, 4, 128, 128  # the tiny preset
p = "base_model.model.model.layers.1.mlp.experts"
# PEFT 0.21: lora_A [r E, in], lora_B [out, r E] of gate_up_proj [E, 2F, D] (inner) and down_proj [E, D, F].
assert h[p + ".base_layer.lora_A.weight"]["shape"] == [r * E, D], h[p + ".base_layer.lora_A.weight"]
assert h[p + ".base_layer.lora_B.weight"]["shape"] == [2 * F, r * E]
assert h[p + ".lora_A.weight"]["shape"] == [r * E, F] and h[p + ".lora_B.weight"]["shape"] == [D, r * E]
assert h["base_model.model.model.layers.0.mlp.gate.router_mlp.out_proj.lora_B.weight"]["shape"] == [E + 1, r]
PY
first=$(losses "$WORK/moe/metrics.jsonl" | head -1) last=$(losses "$WORK/moe/metrics.jsonl" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "the LoRA run did not learn ($first -> $last)"
echo "ok: router and expert targets learn ($first -> $last)"

# Unmerged == merged: the same tokens, the loss to float32 rounding; not the base's.
gen() { "$ZAYA" generate --model "$1" --prompt "And God said" --max-new-tokens 24 --temperature 0 "${@:2}"; }
gen "$BASE" --lora "$MOE" >"$WORK/unmerged.txt" 2>/dev/null
"$ZAYA" ckpt export --in "$BASE" --lora "$MOE" --out "$WORK/merged" --layout native >/dev/null
gen "$WORK/merged" >"$WORK/merged.txt" 2>/dev/null
diff "$WORK/unmerged.txt" "$WORK/merged.txt" || fail "generate --lora differs from the merged model"
head -c 3000 "$SRC/data/kjv/kjv.txt" >"$WORK/held_out.txt"
ppl() { "$ZAYA" eval --model "$1" --text "$WORK/held_out.txt" --json "$WORK/eval.json" "${@:2}" >/dev/null 2>&1 &&
  grep -o '"loss": *[0-9.e+-]*' "$WORK/eval.json" | head -1; }
close() { python3 -c "import sys; a, b, tol = map(float, sys.argv[1:]); sys.exit(abs(a - b) > tol * abs(b))" "$@"; }
num() { echo "${1##*:}"; }
lora_loss=$(ppl "$BASE" --lora "$MOE") || fail "eval --lora"
merged_loss=$(ppl "$WORK/merged") || fail "eval of the merged model"
base_loss=$(ppl "$BASE") || fail "eval of the base model"
close "$(num "$lora_loss")" "$(num "$merged_loss")" 1e-6 ||
  fail "eval --lora ($lora_loss) differs from the merged model ($merged_loss)"
! close "$(num "$lora_loss")" "$(num "$base_loss")" 1e-5 || fail "eval --lora ($lora_loss) is the base model's"
int8_loss=$(ppl "$BASE" --dtype int8 --lora "$MOE") || fail "eval --dtype int8 --lora"
close "$(num "$int8_loss")" "$(num "$lora_loss")" 0.01 || fail "eval --dtype int8 --lora ($int8_loss) vs --lora ($lora_loss)"
echo "ok: unmerged == merged ($lora_loss, merged $merged_loss; the base: $base_loss); int8 $int8_loss"

# Reshaped for dp 2 x ep 2: every adapter (the experts' included) and its moments come back bit for bit.
"$ZAYA" ckpt reshape --in "$WORK/moe/checkpoints/step_00000012" --out "$WORK/reshaped" --dp 2 --ep 2 >/dev/null
"$ZAYA" ckpt compare "$WORK/moe/checkpoints/step_00000012" "$WORK/reshaped/step_00000012" >/dev/null ||
  fail "the reshaped LoRA checkpoint differs"
echo "ok: a LoRA checkpoint with expert targets reshapes bit for bit"

# dp 2 x ep 2: each rank forms its experts' adapter gradients, the world sums them: the single rank's losses.
if command -v mpirun >/dev/null; then
  short=(--quiet --set train.steps=4 --set train.log_every=1 --set schedule.warmup_steps=1)
  "$ZAYA" train --config "$WORK/lora.toml" "${short[@]}" --set train.out_dir="$WORK/one" >/dev/null
  "${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/lora.toml" "${short[@]}" --set parallel.ep=2 \
    --set train.micro_batch=2 --set train.out_dir="$WORK/mesh" >"$WORK/mesh.log" 2>&1 ||
    { cat "$WORK/mesh.log"; fail "LoRA with expert targets on 4 ranks"; }
  paste <(losses "$WORK/one/metrics.jsonl") <(losses "$WORK/mesh/metrics.jsonl") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-3 || NF != 2) bad = 1; n++ } END { exit bad || n != 4 }' ||
    fail "dp 2 x ep 2 does not follow the single rank: $(paste <(losses "$WORK/one/metrics.jsonl") <(losses "$WORK/mesh/metrics.jsonl"))"
  grep -q '"mlp.experts.down_proj"' "$WORK/mesh/adapter/adapter_config.json" ||
    fail "the 4-rank run's adapter lacks the expert targets"
  echo "ok: LoRA with router and expert targets on dp 2 x ep 2 follows the single rank"
fi
echo "ok: lora_moe"
