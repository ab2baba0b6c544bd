#!/usr/bin/env bash
# The side-by-side benchmarks against the PyTorch 2.x stack (bench/vs_torch_{pretrain,lora,decode}.sh,
# docs/performance.md "Side by side with PyTorch 2.x") keep working: each runs once on a tiny shape,
# one round, with the pinned PyPI environment (scripts/python-env.sh), and prints its table. No timing
# is asserted (this is a benchmark, not a test of speed): only that both sides ran on one model and
# every figure the summary prints is there.
#   bash tests/interop/vs_torch_bench.sh ZAYA_BINARY SOURCE_DIR
source "$(dirname "$0")/../e2e/common.bash" "$@"
export PY
PY=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
# Passive OpenMP waiting: on a shared CI machine spinning threads of a preempted team slow PyTorch many-fold.
export ZAYA ROUNDS=1 THREADS=2 TORCH_TIMEOUT=300 OMP_WAIT_POLICY=PASSIVE

# summary_has FILE KEY...: the summary's JSON holds every KEY with a positive number.
summary_has() {
  "$PY" - "$@" <<'PY' || fail "summary $1 lacks a figure"
import json, sys
s = json.load(open(sys.argv[1]))
rows = s if isinstance(s, list) else [s]
assert rows, "no row"
for row in rows:
    for k in sys.argv[2:]:
        if k in row:
            assert isinstance(row[k], (int, float)) and row[k] > 0, (k, row)
assert any(k in row for row in rows for k in sys.argv[2:]), rows
PY
}

# Pretraining on zaya's tiny preset (zaya writes the model, transformers reads it).
OUT=$WORK/pretrain MODES=f32 bash "$SRC/bench/vs_torch_pretrain.sh" tiny 2 16 1 >"$WORK/pretrain.txt"
cat "$WORK/pretrain.txt"
for want in "zaya.cpp f32" "zaya.cpp bf16" "PyTorch eager f32" "ratio: "; do
  grep -q "$want" "$WORK/pretrain.txt" || fail "pretrain summary lacks '$want'"
done
summary_has "$WORK/pretrain/summary.json" ratio

# LoRA on the 8b path narrowed (transformers writes the model, zaya reads it and checks [model]), every
# target kind: attention, router, experts.
OUT=$WORK/lora MODES=bf16 LAYERS=2 VOCAB=512 EXPERTS=4 HIDDEN=64 EXPERT_FFN=64 Q_HEADS=4 KV_HEADS=2 HEAD_DIM=8 \
  ROUTER_HIDDEN=16 bash "$SRC/bench/vs_torch_lora.sh" 8b 2 16 1 4 >"$WORK/lora.txt"
cat "$WORK/lora.txt"
for want in "zaya.cpp bf16" "PyTorch eager bf16 autocast" "ratio: "; do
  grep -q "$want" "$WORK/lora.txt" || fail "lora summary lacks '$want'"
done
summary_has "$WORK/lora/summary.json" ratio

# Decoding at batch 1 (prefill and the roofline too) on tiny.
OUT=$WORK/decode BATCHES=1 PROMPTS=16 DECODE_STEPS=2 bash "$SRC/bench/vs_torch_decode.sh" tiny >"$WORK/decode.txt"
cat "$WORK/decode.txt"
summary_has "$WORK/decode/summary.json" ratio zaya_ms torch_ms roofline_ms zaya_prefill torch_prefill
echo "interop.vs_torch_bench: the three scripts ran"
