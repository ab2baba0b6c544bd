#!/usr/bin/env bash
# A three-phase recipe (configs/small-recipe.toml shrunk to the tiny preset):
# two datasets with one tokenizer (scripts/prepare-recipe-data.sh, with the
# last 20,000 lines of the bundled Bible as the second corpus: fixed data, so
# that a change to anything else in the repository cannot move the
# layout-comparison tolerances below), the run moves from phase to phase
# by itself (metrics records, the last phase's RoPE base in the final
# config.json), and stopping at both phase boundaries and resuming gives the
# uninterrupted run's loss curve and weights bit for bit.
source "$(dirname "$0")/common.bash" "$@"

mkdir -p "$WORK/second"
tail -n 20000 "$SRC/data/kjv/kjv.txt" | split -l 100 --additional-suffix=.txt - "$WORK/second/part-"  # a document each
ZAYA="$ZAYA" VOCAB=512 PYDOC="$WORK/second" bash "$SRC/scripts/prepare-recipe-data.sh" "$WORK/data" >/dev/null
for d in kjv pydoc; do [[ -f $WORK/data/$d/val.idx ]] || fail "prepare-recipe-data.sh did not build $d"; done

cat >"$WORK/recipe.toml" <<TOML
[model]
preset = "tiny"
num_blocks = 2
[data]
tokenizer = "$WORK/data/tokenizer.model"
[train]
micro_batch = 4
eval_every = 0
eval_batches = 2
log_every = 1
out_dir = "$WORK/full"
[checkpoint]
keep_last = 5

[[phase]]
name = "short"
tokens = 1536           # 6 steps of 4 x 64
seq_len = 64
warmup_steps = 2
[[phase.data]]
dir = "$WORK/data/kjv"
weight = 3
[[phase.data]]
dir = "$WORK/data/pydoc"
weight = 1

[[phase]]
name = "technical"
tokens = 1024           # 4 steps
seq_len = 64
[[phase.data]]
dir = "$WORK/data/kjv"
weight = 1
[[phase.data]]
dir = "$WORK/data/pydoc"
weight = 2

[[phase]]
name = "long"
tokens = 768            # 3 steps of 1 x 256
seq_len = 256
micro_batch = 1
rope_theta = 100000
lr = 1e-3
[[phase.data]]
dir = "$WORK/data/kjv"
[[phase.data]]
dir = "$WORK/data/pydoc"
TOML

curve() { grep -o '"loss":[0-9.e+-]*\|"grad_norm":[0-9.e+-]*\|"val_loss":[0-9.e+-]*\|"phase":[0-9]*' "$1"; }

"$ZAYA" train --config "$WORK/recipe.toml" >"$WORK/full.log"
grep -q "phase 3/3 'long': steps 11..13" "$WORK/full.log" || { cat "$WORK/full.log"; fail "no phase 3 announcement"; }
[[ $(grep -c '"phase":' "$WORK/full/metrics.jsonl") == 3 ]] || fail "expected 3 phase records in metrics.jsonl"
grep -q '{"step":7,"phase":2,"name":"technical","steps":4,"micro_batch":4,"seq_len":64' "$WORK/full/metrics.jsonl" ||
  fail "phase 2 record: $(grep '"phase"' "$WORK/full/metrics.jsonl")"
grep -q '{"step":11,"phase":3,"name":"long","steps":3,"micro_batch":1,"seq_len":256,"rope_theta":100000' \
  "$WORK/full/metrics.jsonl" || fail "phase 3 record: $(grep '"phase"' "$WORK/full/metrics.jsonl")"
for s in 6 10 13; do grep -q "{\"step\":$s,\"val_loss\"" "$WORK/full/metrics.jsonl" || fail "no validation at step $s"; done
grep -q '"rope_theta": 100000' "$WORK/full/final/config.json" || fail "final config.json lacks the last phase's RoPE base"

# Stop exactly at each phase boundary (after steps 6 and 10), resume, finish.
split=(--set train.out_dir="$WORK/split")
"$ZAYA" train --config "$WORK/recipe.toml" --quiet "${split[@]}" --stop-at 6 >/dev/null
"$ZAYA" train --config "$WORK/recipe.toml" --quiet "${split[@]}" --resume --stop-at 10 >/dev/null
"$ZAYA" ckpt inspect "$WORK/split/checkpoints/step_00000010" >/dev/null || fail "checkpoint at step 10"
"$ZAYA" train --config "$WORK/recipe.toml" --quiet "${split[@]}" --resume >"$WORK/resume.log"
grep -q "resumed from .*step_00000010 (step 10)" "$WORK/resume.log" || fail "did not resume from step 10"
diff <(curve "$WORK/full/metrics.jsonl") <(curve "$WORK/split/metrics.jsonl") >/dev/null ||
  fail "the resumed recipe's loss curve differs"
cmp -s "$WORK/full/final/model.safetensors" "$WORK/split/final/model.safetensors" || fail "final weights differ"
"$ZAYA" ckpt compare "$WORK/full/checkpoints/step_00000013" "$WORK/split/checkpoints/step_00000013" >/dev/null ||
  fail "final checkpoints differ"
echo "ok: stopping at both phase boundaries and resuming is bit-exact"

# Four ranks (dp 2 x ep 2): four data replicas share each global batch, so the
# phases take a quarter of the steps (2 + 1 + 1); stop in the middle of phase 1
# and resume across both boundaries.
mp=(--quiet --set parallel.ep=2)
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/recipe.toml" "${mp[@]}" --set train.out_dir="$WORK/mfull" >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/recipe.toml" "${mp[@]}" --set train.out_dir="$WORK/msplit" \
  --stop-at 1 >/dev/null
"${MPIRUN[@]}" -np 4 "$ZAYA" train --config "$WORK/recipe.toml" "${mp[@]}" --set train.out_dir="$WORK/msplit" \
  --resume >/dev/null
grep -q '{"step":4,"phase":3,' "$WORK/mfull/metrics.jsonl" || fail "4 ranks: phase 3 should start at step 4"
cmp -s "$WORK/mfull/final/model.safetensors" "$WORK/msplit/final/model.safetensors" || fail "4 ranks: weights differ"
echo "ok: 4 ranks resume in the middle of a phase bit for bit"

# Two ranks with a context-parallel long phase (phase.3.cp = 2), as ZAYA1's
# 32K phase ran: phases 1-2 are data parallel (2 ranks x 2 sequences), phase 3
# splits its one 256-token sequence over both ranks. The global batches are
# the single-rank run's, so the losses agree within 1e-3 nats (float32 sums in
# another order). Stopping where cp changes (step 10) and resuming is bit-exact.
cpr=(--quiet --set train.micro_batch=2 --set phase.3.cp=2)
"${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/recipe.toml" "${cpr[@]}" --set train.out_dir="$WORK/cpfull" \
  >"$WORK/cpfull.log" 2>&1 || { cat "$WORK/cpfull.log"; fail "2 ranks with a cp phase"; }
echo '[[2, 10, 20, 30, 40, 50, 60, 70]]' >"$WORK/ids.json"
expect_same_training full cpfull "$WORK/ids.json" 13
"${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/recipe.toml" "${cpr[@]}" --set train.out_dir="$WORK/cpsplit" \
  --stop-at 10 >/dev/null
"$ZAYA" ckpt inspect "$WORK/cpsplit/checkpoints/step_00000010" | grep -q "(dp 2 x ep 1)" ||
  fail "the step-10 checkpoint should be written by dp 2 (phase 2)"
"${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/recipe.toml" "${cpr[@]}" --set train.out_dir="$WORK/cpsplit" \
  --resume >/dev/null
"$ZAYA" ckpt inspect "$WORK/cpsplit/checkpoints/step_00000013" | grep -q "(dp 1 x ep 1 x cp 2)" ||
  fail "the final checkpoint should be written by cp 2 (phase 3)"
cmp -s "$WORK/cpfull/final/model.safetensors" "$WORK/cpsplit/final/model.safetensors" ||
  fail "2 ranks: resuming into the cp phase changed the weights"
echo "ok: a cp=2 phase matches one rank, and resumes across the cp change bit for bit"

# Bad recipes are reported with the file, the key and what is allowed.
sed '0,/weight = 1/s//weight = 0/' "$WORK/recipe.toml" >"$WORK/bad.toml"
expect_error 1 "bad.toml:[0-9]+: phase\[1\].data\[2\].weight = 0 is invalid; allowed: a number in \(0," -- \
  "$ZAYA" train --config "$WORK/bad.toml" --quiet
expect_error 2 "^error: --set train.steps=5: train.steps = 5 is not allowed here: the config has \[\[phase\]\] tables" -- \
  "$ZAYA" train --config "$WORK/recipe.toml" --set train.steps=5 --quiet
expect_error 1 "phase\[3\].cp = 2 differs from parallel.cp = 1, which needs parallel.ep = 1" -- \
  "$ZAYA" train --config "$WORK/recipe.toml" --set phase.3.cp=2 --set parallel.ep=2 --quiet
expect_error 1 "phase\[3\].seq_len = 256 does not fit phase\[3\].cp = 3" -- \
  "$ZAYA" train --config "$WORK/recipe.toml" --set phase.3.cp=3 --quiet
echo "recipe: OK"
