#!/usr/bin/env bash
# Reshaping: a checkpoint written by dp 2 x ep 2 continues on 1 rank and on
# dp 3 (online: every layout reads any checkpoint) and matches a run that
# never changed layout within 1e-3 nats; offline `zaya ckpt reshape` to dp 3
# and back reproduces every tensor bit for bit; export to safetensors gives the
# trainer's own final weights, and import brings them back.
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 20
cat >>"$WORK/base.toml" <<'TOML'
[checkpoint]
every = 10
TOML
# Global batch 12 sequences: 4 ranks x 3, 1 x 12, 3 x 4.
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet --set parallel.ep=2 \
  --set train.micro_batch=3 --set train.out_dir="$WORK/ref" >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet --set parallel.ep=2 \
  --set train.micro_batch=3 --set train.out_dir="$WORK/a" --stop-at 10 >/dev/null
ck=$WORK/a/checkpoints/step_00000010
"$ZAYA" ckpt inspect "$ck" | grep -q "written by 4 rank(s) (dp 2 x ep 2)" || fail "inspect layout"

continue_as() {  # name ranks micro_batch ep
  mkdir -p "$WORK/$1"
  cp -r "$WORK/a/checkpoints" "$WORK/$1/"
  cp "$WORK/a/metrics.jsonl" "$WORK/$1/"
  "${MPIRUN[@]}" -np "$2" "$ZAYA" train --config "$WORK/base.toml" --quiet --set "parallel.ep=$4" \
    --set "train.micro_batch=$3" --set train.out_dir="$WORK/$1" --resume >"$WORK/$1.log" 2>&1 ||
    { cat "$WORK/$1.log"; fail "continuing as $1"; }
  paste <(losses "$WORK/ref/metrics.jsonl") <(losses "$WORK/$1/metrics.jsonl") |
    awk -v L="$1" '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END {
      printf "%s: largest loss difference from the unchanged layout %.2e\n", L, m; exit !(NR == 4 && m < 1e-3) }' ||
    fail "$1: losses differ from the run that never changed layout"
}
continue_as one 1 12 1
continue_as dp3 3 4 1

# Offline reshape to dp 3 and back: bit for bit.
"$ZAYA" ckpt reshape --in "$ck" --out "$WORK/r3" --dp 3 --ep 1 >/dev/null
"$ZAYA" ckpt inspect "$WORK/r3/step_00000010" | grep -q "written by 3 rank(s) (dp 3 x ep 1)" || fail "reshape layout"
"$ZAYA" ckpt reshape --in "$WORK/r3/step_00000010" --out "$WORK/r22" --dp 2 --ep 2 >/dev/null
"$ZAYA" ckpt verify "$WORK/r22/step_00000010" >/dev/null
"$ZAYA" ckpt compare "$ck" "$WORK/r22/step_00000010" || fail "round trip changed a tensor"
"$ZAYA" ckpt compare "$ck" "$WORK/r3/step_00000010" >/dev/null || fail "reshape changed a tensor"
# The reshaped checkpoint trains on its target layout.
mkdir -p "$WORK/via3"
"${MPIRUN[@]}" -np 3 "$ZAYA" train --config "$WORK/base.toml" --quiet --set train.micro_batch=4 \
  --set train.out_dir="$WORK/via3" --resume "$WORK/r3/step_00000010" >/dev/null || fail "training from the reshape"

# Export / import.
"$ZAYA" ckpt export --in "$WORK/ref/checkpoints/step_00000020" --out "$WORK/hf" >/dev/null
cmp -s "$WORK/hf/model.safetensors" "$WORK/ref/final/model.safetensors" || fail "export differs from final weights"
"$ZAYA" ckpt export --in "$WORK/ref/checkpoints/step_00000020" --out "$WORK/hf16" --dtype bf16 >/dev/null
"$ZAYA" ckpt import --in "$WORK/hf" --out "$WORK/imported" --config "$WORK/base.toml" >/dev/null
"$ZAYA" ckpt compare --weights-only "$WORK/ref/checkpoints/step_00000020" "$WORK/imported/step_00000000" ||
  fail "import changed a weight"
# GGUF (stacked expert tensors): f32 round trip bit for bit; bf16 is smaller and close.
"$ZAYA" ckpt export --in "$WORK/ref/checkpoints/step_00000020" --out "$WORK/model.gguf" --format gguf >/dev/null
"$ZAYA" ckpt import --in "$WORK/model.gguf" --out "$WORK/from_gguf" --config "$WORK/base.toml" >/dev/null
"$ZAYA" ckpt compare --weights-only "$WORK/ref/checkpoints/step_00000020" "$WORK/from_gguf/step_00000000" ||
  fail "GGUF round trip changed a weight"
"$ZAYA" ckpt export --in "$WORK/ref/checkpoints/step_00000020" --out "$WORK/model16.gguf" --format gguf --dtype bf16 \
  >/dev/null
"$ZAYA" ckpt import --in "$WORK/model16.gguf" --out "$WORK/from_gguf16" --config "$WORK/base.toml" >/dev/null
"$ZAYA" ckpt compare --weights-only --tolerance 0.02 "$WORK/ref/checkpoints/step_00000020" \
  "$WORK/from_gguf16/step_00000000" || fail "bf16 GGUF round trip"
[[ $(stat -c %s "$WORK/model16.gguf") -lt $(stat -c %s "$WORK/model.gguf") ]] || fail "bf16 GGUF is not smaller"
expect_error 2 "only for --format gguf" -- "$ZAYA" ckpt export --in "$WORK/ref/checkpoints/step_00000020" \
  --out "$WORK/x" --dtype f16
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.steps=22 --set train.out_dir="$WORK/ft" \
  --resume "$WORK/imported/step_00000000" --stop-at 2 >/dev/null || fail "training from an imported model"
echo "checkpoint reshape: OK"
