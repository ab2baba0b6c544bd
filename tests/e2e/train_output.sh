#!/usr/bin/env bash
# What `zaya train` tells its user (issue [ux]): start-up checks of what only
# the end of a run needs, the layout and global batch of a distributed run, a
# validation loss only on the step it was measured, how to continue after a
# stop, a resumed run's summary, and a finished run resumed.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config train.toml 20

# A missing or wrong tokenizer fails at start-up, naming the key, before any step.
expect_error 1 "data.tokenizer = '/nowhere.model' does not exist" -- \
  "$ZAYA" train --config "$WORK/train.toml" --set data.tokenizer=/nowhere.model --set train.out_dir="$WORK/t1"
[[ ! -e $WORK/t1/metrics.jsonl ]] || fail "a run with a missing tokenizer trained"
"$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --vocab-size 600 --out "$WORK/other" >/dev/null
expect_error 1 "data.tokenizer = '$WORK/other.model' has 600 pieces, but the token shards in '$WORK/data' were built with a vocabulary of 512" -- \
  "$ZAYA" train --config "$WORK/train.toml" --set data.tokenizer="$WORK/other.model" --set train.out_dir="$WORK/t2"

# A stop (SIGTERM at step 8): exit 75 and how to continue.
rc=0
"$ZAYA" train --config "$WORK/train.toml" --set checkpoint.every=5 --inject preempt:step=8 >"$WORK/stop.log" 2>&1 || rc=$?
[[ $rc == 75 ]] || { cat "$WORK/stop.log"; fail "a stop must exit 75, got $rc"; }
grep -q "stopped at step 7 with a checkpoint; continue with: zaya train --config $WORK/train.toml --resume" "$WORK/stop.log" ||
  { cat "$WORK/stop.log"; fail "the stop does not say how to continue"; }
# The validation loss appears on the step it was measured (10), not after it (15).
"$ZAYA" train --config "$WORK/train.toml" --set checkpoint.every=5 --resume >"$WORK/resume.log" 2>&1
grep -Eq "^step +10/20 \| loss [0-9.]+ \| val [0-9]" "$WORK/resume.log" || fail "no validation loss at step 10"
grep -Eq "^step +15/20 \| loss [0-9.]+ \| val +- " "$WORK/resume.log" || fail "step 15 repeats an old validation loss"
# The summary's train losses are means over a few steps (13 steps: 2 at each end), named (red-team L17).
grep -Eq "^done: steps 8-20 \(resumed from step 7\), train loss [0-9.]+ \(mean of steps 8-9\) -> [0-9.]+ \(steps 19-20\), val loss" \
  "$WORK/resume.log" || fail "resumed summary: $(grep done: "$WORK/resume.log")"
# A fresh run validates the model before its first update, once: the resumed run keeps that record.
grep -Eq "^step +0/20 \| val [0-9.]+ \(before the first update\)" "$WORK/stop.log" || fail "no step-0 validation: $(cat "$WORK/stop.log")"
! grep -q "before the first update" "$WORK/resume.log" || fail "the resumed run validated step 0 again"
[[ $(grep -c '{"step":0,"val_loss":' "$WORK/run/metrics.jsonl") == 1 ]] || fail "step 0's validation is not recorded once"
# Resuming the finished run does nothing, and says so.
before=$(stat -c %Y "$WORK/run/final/model.safetensors")
"$ZAYA" train --config "$WORK/train.toml" --resume >"$WORK/again.log" 2>&1
grep -q "the run is already complete at step 20 (train.steps 20); nothing to do" "$WORK/again.log" || fail "$(cat "$WORK/again.log")"
[[ $(stat -c %Y "$WORK/run/final/model.safetensors") == "$before" ]] || fail "final/ rewritten by a run with nothing to do"

# Two ranks (dp 2): the header names the layout and the global tokens per step.
"${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/train.toml" --set train.steps=2 --set schedule.warmup_steps=1 --set train.out_dir="$WORK/mpi" \
  --set train.micro_batch=4 >"$WORK/mpi.log" 2>&1 || { cat "$WORK/mpi.log"; fail "2 ranks"; }
grep -q "2 steps x 512 tokens (2 ranks: dp 2 x ep 1 x cp 1; per rank 4 x 64 x 1 accum)" "$WORK/mpi.log" ||
  fail "MPI header: $(grep steps "$WORK/mpi.log" | head -2)"
echo "train output: OK"
