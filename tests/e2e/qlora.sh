#!/usr/bin/env bash
# LoRA over a quantized base (QLoRA, docs/training.md "LoRA over a quantized
# base"): a tiny base exported with MXFP4 experts (`ckpt export --experts
# mxfp4`) is fine-tuned with [lora] base_dtype = "mxfp4", its experts held only
# as the packed rows read from the file. The run learns; its losses are those
# of the same run over the experts dequantized to float32 (base_dtype "float")
# to float32 summation order; its PEFT adapter loads into the server's decoder
# over the same packed experts (`--dtype mxfp4 --lora`), whose log-probs equal
# the training forward's (`score --full-sequence --base-dtype mxfp4`) within
# the stated bound; fp8 and int8 bases quantized at load train too; a width
# MXFP4 cannot hold is refused by name.
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 30
"$ZAYA" train --config "$WORK/base.toml" --quiet >/dev/null
"$ZAYA" ckpt export --in "$WORK/run/final" --out "$WORK/q" --layout native --experts mxfp4 --dtype bf16 >/dev/null
Q=$WORK/q

sed '/^out_dir/d' "$WORK/base.toml" >"$WORK/lora.toml"
cat >>"$WORK/lora.toml" <<TOML
[optim]
lr = 0.01
[lora]
rank = 4
alpha = 8
targets = ["q_proj", "o_proj", "mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
base_dtype = "mxfp4"
TOML
sed -i "/^\[model\]$/a init_from = \"$Q\"" "$WORK/lora.toml"
sed -i 's/^steps = 30$/steps = 12/; s/^log_every = 5$/log_every = 1/' "$WORK/lora.toml"

"$ZAYA" train --config "$WORK/lora.toml" --set train.out_dir="$WORK/qlora" >"$WORK/qlora.log" 2>&1 ||
  { cat "$WORK/qlora.log"; fail "LoRA over the MXFP4 base"; }
grep -q "the base is frozen, its routed experts held as mxfp4" "$WORK/qlora.log" ||
  fail "the run's header does not say the experts are held as mxfp4: $(grep LoRA "$WORK/qlora.log")"
first=$(losses "$WORK/qlora/metrics.jsonl" | head -1) last=$(losses "$WORK/qlora/metrics.jsonl" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "the QLoRA run did not learn ($first -> $last)"
echo "ok: LoRA over MXFP4 experts learns ($first -> $last)"

# The same run over the experts dequantized to float32: the same losses, to float32 summation order.
"$ZAYA" train --config "$WORK/lora.toml" --quiet --set lora.base_dtype=float --set train.out_dir="$WORK/ref" >/dev/null
paste <(losses "$WORK/qlora/metrics.jsonl") <(losses "$WORK/ref/metrics.jsonl") |
  awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; if (d > 1e-4 * $2 || NF != 2) bad = 1; n++ }
       END { printf "max |loss difference| over %d records: %.3g\n", n, m; exit bad || n < 12 }' ||
  fail "the MXFP4 base's losses differ from the dequantized float32 base's: $(paste <(losses "$WORK/qlora/metrics.jsonl") <(losses "$WORK/ref/metrics.jsonl"))"
echo "ok: the MXFP4 base trains as its dequantized float32 values do"

# The PEFT adapter on the server's decoder over the packed experts: the training forward's log-probs.
A=$WORK/qlora/adapter
[[ -f $A/adapter_config.json && -f $A/adapter_model.safetensors ]] || fail "no PEFT adapter in $A"
python3 - "$WORK/tokens.json" <<'PY'
import json, sys
seqs = [[(i * 37 + 11 * s + 5) % 500 + 3 for i in range(48)] for s in range(3)]
json.dump(seqs, open(sys.argv[1], "w"))
PY
"$ZAYA" score --model "$Q" --tokens "$WORK/tokens.json" --lora "$A" --full-sequence --base-dtype mxfp4 \
  --json "$WORK/train_scores.json" >/dev/null || fail "score --full-sequence --base-dtype mxfp4"
# The server's MXFP4 products with float activations (the training forward's
# arithmetic but for summation order), and with its default int8-quantized
# activations (ops/matvec_mxfp4_q8.h: the activations' rounding on top).
ZAYA_MXFP4_ACTIVATIONS=float "$ZAYA" score --model "$Q" --tokens "$WORK/tokens.json" --lora "$A" --dtype mxfp4 \
  --json "$WORK/serve_scores.json" >/dev/null || fail "score --dtype mxfp4 --lora (float activations)"
ZAYA_MXFP4_ACTIVATIONS=int8 "$ZAYA" score --model "$Q" --tokens "$WORK/tokens.json" --lora "$A" --dtype mxfp4 \
  --json "$WORK/serve_int8_scores.json" >/dev/null || fail "score --dtype mxfp4 --lora (int8 activations)"
"$ZAYA" score --model "$Q" --tokens "$WORK/tokens.json" --full-sequence --base-dtype mxfp4 \
  --json "$WORK/base_scores.json" >/dev/null || fail "score of the base"
python3 - "$WORK/train_scores.json" "$WORK/serve_scores.json" "$WORK/base_scores.json" \
  "$WORK/serve_int8_scores.json" <<'PY' ||
import json, sys
train, serve, base, serve8 = (json.load(open(p)) for p in sys.argv[1:])
def worst(xs):
    return max(abs(a["mean_loss"] - b["mean_loss"]) / abs(a["mean_loss"]) for a, b in zip(train, xs))
moved = min(abs(a["mean_loss"] - b["mean_loss"]) for a, b in zip(train, base))
print(f"served vs trained mean log-prob per sequence: max relative difference {worst(serve):.2e} (float activations), "
      f"{worst(serve8):.2e} (int8 activations); the adapter moves them by >= {moved:.3g}")
sys.exit(not (len(train) == 3 and len(serve8) == 3 and worst(serve) <= 1e-5 and worst(serve8) <= 1e-3
              and moved > 1e-4))
PY
  fail "the served log-probs (--dtype mxfp4 --lora) differ from the training forward's"
"$ZAYA" generate --model "$Q" --dtype mxfp4 --lora "$A" --prompt "And God said" --max-new-tokens 16 \
  --temperature 0 >"$WORK/gen.txt" 2>/dev/null || fail "generate --dtype mxfp4 --lora"
[[ -s $WORK/gen.txt ]] || fail "generate --dtype mxfp4 --lora wrote nothing"
echo "ok: the adapter serves over the MXFP4 experts with the training forward's log-probs"

# fp8 and int8 bases quantized at load from the float checkpoint.
for dt in fp8 int8; do
  "$ZAYA" train --config "$WORK/lora.toml" --quiet --set lora.base_dtype=$dt --set train.steps=3 --set schedule.warmup_steps=1 \
    --set model.init_from="$WORK/run/final" --set train.out_dir="$WORK/$dt" >/dev/null || fail "base_dtype = $dt"
  [[ $(losses "$WORK/$dt/metrics.jsonl" | wc -l) -ge 3 ]] || fail "base_dtype = $dt logged no losses"
done
echo "ok: fp8 and int8 bases quantized at load train"
expect_error 2 "lora.base_dtype = 'nf4' is invalid; allowed: one of: float, mxfp4, fp8, int8" -- \
  "$ZAYA" train --config "$WORK/lora.toml" --quiet --set lora.base_dtype=nf4 --set train.out_dir="$WORK/x"
echo "ok: qlora"
