#!/usr/bin/env bash
# `zaya ckpt random` (docs/cli.md): a random model directory written shard by
# shard in bf16, native layout; `ckpt inspect` reads it, a LoRA run starts
# from it with its base frozen in bf16 (no base gradients, the large matrices
# without a float32 copy: bench train's parameter bytes); bad input is named.
source "$(dirname "$0")/common.bash" "$@"
OUT=$WORK/random
"$ZAYA" ckpt random --preset tiny --out "$OUT" --shard-mb 1 --seed 3 >"$WORK/random.log"
grep -q "native layout, bf16" "$WORK/random.log" || fail "ckpt random does not say what it wrote: $(cat "$WORK/random.log")"
[[ -f $OUT/config.json && -f $OUT/model.safetensors.index.json ]] || fail "no config.json or shard index in $OUT"
(($(ls "$OUT"/model-*-of-*.safetensors | wc -l) > 1)) || fail "--shard-mb 1 did not split the tiny model"
"$ZAYA" ckpt inspect "$OUT" >"$WORK/inspect.txt"
grep -q "native layout" "$WORK/inspect.txt" && grep -q "BF16, F32" "$WORK/inspect.txt" ||
  fail "ckpt inspect: $(cat "$WORK/inspect.txt")"
echo "ok: ckpt random wrote $(ls "$OUT" | wc -l) files"

"$ZAYA" bench train --preset tiny --set model.init_from="$OUT" --set lora.rank=4 --set train.precision=bf16 \
  --micro-batch 1 --seq-len 32 --steps 1 --warmup 0 --threads 2 --json "$WORK/lora.json" >/dev/null
python3 - "$WORK/lora.json" <<'PY' || fail "the LoRA run's parameter memory"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["lora"] and j["base_gradient_bytes"] == 0, j
assert 0 < j["f32_param_bytes"] < j["bf16_param_bytes"], j
PY
echo "ok: LoRA from it holds the base in bf16 without base gradients"

mkdir -p "$WORK/full" && touch "$WORK/full/x"
expect_error 1 "--out '$WORK/full' exists and is not empty" -- "$ZAYA" ckpt random --preset tiny --out "$WORK/full"
expect_error 1 "unknown model preset 'nope'; allowed: tiny" -- "$ZAYA" ckpt random --preset nope --out "$WORK/n"
expect_error 2 "--dtype f16 is invalid; allowed: bf16, f32" -- "$ZAYA" ckpt random --preset tiny --out "$WORK/d" \
  --dtype f16
echo "ok: ckpt_random"
