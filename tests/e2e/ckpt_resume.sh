#!/usr/bin/env bash
# Exact resume: stopping at step 10 and resuming gives the loss curve and the
# final weights of the uninterrupted run bit for bit, on one rank (also with
# sliding-window attention, and with document masking) and on 4 ranks (dp 2 x
# ep 2), in float32 and with bf16 GEMMs (train.precision = "bf16"), with
# activation recomputation (the run without it, bit for bit); damaged checkpoints
# are skipped by --resume.
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 20
cat >>"$WORK/base.toml" <<'TOML'
[checkpoint]
every = 5
keep_last = 2
TOML
curve() { grep -o '"loss":[0-9.e+-]*\|"grad_norm":[0-9.e+-]*\|"val_loss":[0-9.e+-]*' "$1"; }
check_same() {  # dir_a dir_b what
  diff <(curve "$1/metrics.jsonl") <(curve "$2/metrics.jsonl") >/dev/null || fail "$3: loss curves differ"
  cmp -s "$1/final/model.safetensors" "$2/final/model.safetensors" || fail "$3: final weights differ"
  "$ZAYA" ckpt compare "$1/checkpoints/step_00000020" "$2/checkpoints/step_00000020" >/dev/null ||
    fail "$3: final checkpoints differ (weights, optimizer or controller state)"
  echo "ok: $3 resumes bit for bit"
}

# One rank.
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/full" >/dev/null
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/split" --stop-at 10 >/dev/null
[[ -d $WORK/split/checkpoints/step_00000010 ]] || fail "no checkpoint at the stop"
# Starting again without --resume must not overwrite that run's checkpoints.
expect_error 1 "already holds checkpoints.*pass --resume" -- \
  "$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/split"
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/split" --resume >/dev/null
check_same "$WORK/full" "$WORK/split" "1 rank"

# Sliding-window attention (model.sliding_window = 3 on the even blocks, their
# own RoPE base): the loss falls, the run records the keys, a resume is exact.
sed '/^num_blocks = 2$/a sliding_window = 3\nsliding_rope_theta = 500.0' "$WORK/base.toml" >"$WORK/swa.toml"
"$ZAYA" train --config "$WORK/swa.toml" --quiet --set train.out_dir="$WORK/swa_full" >/dev/null
grep -q '^sliding_window = 3$' "$WORK/swa_full/config.toml" || fail "config.toml lacks sliding_window = 3"
grep -q '^sliding_blocks = \[0\]$' "$WORK/swa_full/config.toml" || fail "config.toml lacks sliding_blocks = [0]"
first=$(losses "$WORK/swa_full/metrics.jsonl" | head -1) last=$(losses "$WORK/swa_full/metrics.jsonl" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "sliding window: loss $first -> $last"
echo "ok: sliding window trains (loss $first -> $last)"
"$ZAYA" train --config "$WORK/swa.toml" --quiet --set train.out_dir="$WORK/swa_split" --stop-at 10 >/dev/null
"$ZAYA" train --config "$WORK/swa.toml" --quiet --set train.out_dir="$WORK/swa_split" --resume >/dev/null
check_same "$WORK/swa_full" "$WORK/swa_split" "sliding window, 1 rank"
# Full attention trains another curve (the window is really applied).
diff <(curve "$WORK/full/metrics.jsonl") <(curve "$WORK/swa_full/metrics.jsonl") >/dev/null &&
  fail "the sliding-window run logged the full-attention run's curve"

# Document masking (data.document_masking = true: windows that span two
# chapters are computed as separate documents): the run records the key,
# trains another curve than the unmasked run, and a resume is exact, on one
# rank and on two context-parallel ranks (document starts in the other chunk).
sed '/^tokenizer = /a document_masking = true' "$WORK/base.toml" >"$WORK/doc.toml"
"$ZAYA" train --config "$WORK/doc.toml" --quiet --set train.out_dir="$WORK/doc_full" >/dev/null
grep -q '^document_masking = true$' "$WORK/doc_full/config.toml" || fail "config.toml lacks document_masking = true"
"$ZAYA" train --config "$WORK/doc.toml" --quiet --set train.out_dir="$WORK/doc_split" --stop-at 10 >/dev/null
"$ZAYA" train --config "$WORK/doc.toml" --quiet --set train.out_dir="$WORK/doc_split" --resume >/dev/null
check_same "$WORK/doc_full" "$WORK/doc_split" "document masking, 1 rank"
diff <(curve "$WORK/full/metrics.jsonl") <(curve "$WORK/doc_full/metrics.jsonl") >/dev/null &&
  fail "the document-masking run logged the unmasked run's curve"
cpm=(--set parallel.cp=2)
"${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/doc.toml" --quiet "${cpm[@]}" --set train.out_dir="$WORK/doc_cfull" \
  >/dev/null
"${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/doc.toml" --quiet "${cpm[@]}" --set train.out_dir="$WORK/doc_csplit" \
  --stop-at 10 >/dev/null
"${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/doc.toml" --quiet "${cpm[@]}" --set train.out_dir="$WORK/doc_csplit" \
  --resume >/dev/null
check_same "$WORK/doc_cfull" "$WORK/doc_csplit" "document masking, 2 ranks (cp 2)"
# cp 2 computes what one rank does (float32 sums in another order).
paste <(losses "$WORK/doc_full/metrics.jsonl") <(losses "$WORK/doc_cfull/metrics.jsonl") |
  awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > max) max = d } END { exit !(NR > 0 && max < 1e-3) }' ||
  fail "document masking: the cp 2 losses differ from one rank's by 1e-3 or more"

# Four ranks, dp 2 x ep 2.
mp=(--set parallel.ep=2 --set train.micro_batch=2)
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" --set train.out_dir="$WORK/mfull" >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" --set train.out_dir="$WORK/msplit" \
  --stop-at 10 >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" --set train.out_dir="$WORK/msplit" \
  --resume >/dev/null
check_same "$WORK/mfull" "$WORK/msplit" "4 ranks (dp 2 x ep 2)"

# Mixed precision (train.precision = "bf16": bf16 GEMMs, float32 master
# weights): resumes bit for bit on 1 and 4 ranks (the bf16 weight copies are
# rebuilt from the loaded parameters), and its curve is not the float32 one.
bf=(--set train.precision=bf16)
"$ZAYA" train --config "$WORK/base.toml" --quiet "${bf[@]}" --set train.out_dir="$WORK/bf_full" >/dev/null
grep -q '^precision = "bf16"$' "$WORK/bf_full/config.toml" || fail "config.toml lacks precision = \"bf16\""
"$ZAYA" train --config "$WORK/base.toml" --quiet "${bf[@]}" --set train.out_dir="$WORK/bf_split" --stop-at 10 >/dev/null
"$ZAYA" train --config "$WORK/base.toml" --quiet "${bf[@]}" --set train.out_dir="$WORK/bf_split" --resume >/dev/null
check_same "$WORK/bf_full" "$WORK/bf_split" "bf16, 1 rank"
diff <(curve "$WORK/full/metrics.jsonl") <(curve "$WORK/bf_full/metrics.jsonl") >/dev/null &&
  fail "the bf16 run logged the float32 run's curve"
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" "${bf[@]}" \
  --set train.out_dir="$WORK/bf_mfull" >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" "${bf[@]}" \
  --set train.out_dir="$WORK/bf_msplit" --stop-at 10 >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" "${bf[@]}" \
  --set train.out_dir="$WORK/bf_msplit" --resume >/dev/null
check_same "$WORK/bf_mfull" "$WORK/bf_msplit" "bf16, 4 ranks (dp 2 x ep 2)"
# The ZeRO-1 all-gather in bf16 (parallel.zero_gather_dtype = "bf16") fills
# the bf16 weight copies with the rounding of what the float32 gather gives:
# the float32-gather run above bit for bit, resumed, in fewer bytes.
bg=(--set parallel.zero_gather_dtype=bf16)
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" "${bf[@]}" "${bg[@]}" \
  --set train.out_dir="$WORK/bg_msplit" --stop-at 10 >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" "${bf[@]}" "${bg[@]}" \
  --set train.out_dir="$WORK/bg_msplit" --resume >/dev/null
check_same "$WORK/bf_mfull" "$WORK/bg_msplit" "bf16 ZeRO-1 gather against the float32 gather, 4 ranks (dp 2 x ep 2)"
gathered() { grep -o '"param_gather_bytes":[0-9]*' "$1/metrics.jsonl" | head -1 | cut -d: -f2; }
f32_bytes=$(gathered "$WORK/bf_mfull") bf16_bytes=$(gathered "$WORK/bg_msplit")
[[ -n $f32_bytes && -n $bf16_bytes ]] && ((bf16_bytes > 0 && 10 * bf16_bytes < 6 * f32_bytes)) ||
  fail "param_gather_bytes: bf16 gather ${bf16_bytes:-none}, float32 ${f32_bytes:-none} (expected under 0.6x)"
echo "ok: the bf16 gather received $bf16_bytes bytes per step on rank 0 (float32: $f32_bytes)"

# Activation recomputation (train.recompute) computes the run without it bit
# for bit, and resumes so: on 1 rank (full), and on 4 ranks (dp 2 x ep 2,
# moe) where the expert all-to-all runs again in backward.
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.recompute=full --set train.out_dir="$WORK/rc_split" \
  --stop-at 10 >/dev/null
grep -q '^recompute = "full"$' "$WORK/rc_split/config.toml" || fail "config.toml lacks recompute = \"full\""
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.recompute=full --set train.out_dir="$WORK/rc_split" \
  --resume >/dev/null
check_same "$WORK/full" "$WORK/rc_split" "recompute full (against none), 1 rank"
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" --set train.recompute=moe \
  --set train.out_dir="$WORK/rc_msplit" --stop-at 10 >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/base.toml" --quiet "${mp[@]}" --set train.recompute=moe \
  --set train.out_dir="$WORK/rc_msplit" --resume >/dev/null
check_same "$WORK/mfull" "$WORK/rc_msplit" "recompute moe (against none), 4 ranks (dp 2 x ep 2)"

# A damaged newest checkpoint: --resume falls back to the previous one.
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/dmg" --stop-at 10 >/dev/null
shard=$(ls "$WORK"/dmg/checkpoints/step_00000010/shard-*.bin | head -1)
printf 'garbage' | dd of="$shard" bs=1 seek=200 conv=notrunc status=none
"$ZAYA" ckpt verify "$WORK/dmg/checkpoints/step_00000010" >/dev/null 2>&1 && fail "verify missed the damage"
"$ZAYA" train --config "$WORK/base.toml" --set train.out_dir="$WORK/dmg" --resume >"$WORK/dmg.log" 2>&1 ||
  { cat "$WORK/dmg.log"; fail "resume with a damaged newest checkpoint"; }
grep -q "resumed from .*step_00000005 (step 5)" "$WORK/dmg.log" || fail "did not fall back to step 5"
grep -q "skipped damaged checkpoints" "$WORK/dmg.log" || fail "no warning about the damaged checkpoint"
[[ -d $WORK/dmg/checkpoints/step_00000010.damaged ]] || fail "the damaged checkpoint was not kept aside"
[[ -d $WORK/dmg/checkpoints/step_00000020 ]] || fail "the resumed run did not finish"
echo "checkpoint resume: OK"
