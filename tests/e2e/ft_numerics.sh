#!/usr/bin/env bash
# Numerical faults: a NaN skips exactly its step (the run equals one told to
# skip that step); spike decisions are reproducible (a run told to skip the
# steps the detector skipped is identical); persistent trouble rolls back to
# the last checkpoint and skips the offending data; a failed checkpoint write
# (a full disk) keeps the earlier checkpoints and training goes on; a slow
# rank is reported as a straggler.
source "$(dirname "$0")/common.bash" "$@"
write_ft_config base.toml
TRAIN=("${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$WORK/base.toml" --quiet)
curve_without() {  # dir step: the curve without that step's record
  grep -v "\"step\":$2," "$1/metrics.jsonl" | grep -o '"loss":[0-9.e+-]*\|"grad_norm":[0-9.e+-]*\|"val_loss":[0-9.e+-]*'
}

"${TRAIN[@]}" --set train.out_dir="$WORK/nan" --inject nan:rank=1,step=5 >/dev/null 2>&1 || fail "nan run"
has() { grep "\"event\":\"$2\"" "$WORK/$1/incidents.jsonl" | grep -q -- "$3"; }  # dir event text
has nan skipped-step "step 5: nan" || fail "no skipped-step incident for the NaN"
grep '"step":5,' "$WORK/nan/metrics.jsonl" | grep -q '"skipped":"nan"' || fail "step 5's metrics lack \"skipped\":\"nan\""
"${TRAIN[@]}" --set train.out_dir="$WORK/skip5" --set "ft.skip_steps=[5]" >/dev/null 2>&1 || fail "skip run"
diff <(curve_without "$WORK/nan" 5) <(curve_without "$WORK/skip5" 5) >/dev/null || fail "NaN run differs from skipping step 5"
cmp -s "$WORK/nan/final/model.safetensors" "$WORK/skip5/final/model.safetensors" || fail "NaN run weights differ"
echo "ok: a NaN at step 5 skips exactly that update"

# Spikes: the detector (z-score over the recent window) skips an injected loss spike at step 8;
# replaying the skips it logged reproduces the run.
"${TRAIN[@]}" --set train.out_dir="$WORK/spiky" --set ft.spike_warmup=4 --inject spike:rank=0,step=8 \
  >/dev/null 2>&1 || fail "spike run"
steps=$(grep -o 'step [0-9]*: [a-z-]*spike' "$WORK/spiky/incidents.jsonl" | grep -o '[0-9]*' | paste -sd, -)
[[ $steps == 8 ]] || fail "the detector skipped steps [$steps], expected [8]"
"${TRAIN[@]}" --set train.out_dir="$WORK/replay" --set "ft.skip_steps=[$steps]" --set ft.spike_z=0 >/dev/null 2>&1 ||
  fail "replay run"
cmp -s "$WORK/spiky/final/model.safetensors" "$WORK/replay/final/model.safetensors" ||
  fail "skipping step $steps by hand does not reproduce the spike run"
echo "ok: spike decisions (steps $steps) are reproducible"

# Persistent trouble: three NaN steps in a row roll back to the checkpoint of step 3.
"${TRAIN[@]}" --set train.out_dir="$WORK/roll" --inject "nan:step=4;nan:step=5;nan:step=6" >/dev/null 2>&1 ||
  fail "rollback run"
has roll rollback "step_00000003 (step 3)" || fail "no rollback to step 3"
[[ $(grep -c '"val_loss"' "$WORK/roll/metrics.jsonl") -ge 1 ]] || fail "the rolled-back run did not finish"
[[ -d $WORK/roll/checkpoints/step_00000012 ]] || fail "no final checkpoint after the rollback"
echo "ok: persistent NaNs roll back to step 3 and training finishes"

# A full disk during the save of step 6.
"${TRAIN[@]}" --set train.out_dir="$WORK/disk" --inject ckpt-write:rank=1,step=6 >/dev/null 2>&1 || fail "disk run"
has disk save-failed "checkpoint step 6" || fail "no save-failed incident"
"$ZAYA" ckpt verify "$WORK/disk/checkpoints/step_00000003" >/dev/null || fail "checkpoint 3 damaged"
[[ ! -e $WORK/disk/checkpoints/step_00000006 && -d $WORK/disk/checkpoints/step_00000012 ]] ||
  fail "unexpected checkpoints after the failed save"
expect_error 1 "injected checkpoint write fault" -- "${TRAIN[@]}" --set train.out_dir="$WORK/disk2" \
  --set ft.on_save_error=stop --inject ckpt-write:rank=0,step=6
echo "ok: a failed save keeps earlier checkpoints; training continues (or stops cleanly with on_save_error = stop)"

# A straggler.
"${TRAIN[@]}" --set train.out_dir="$WORK/slow" --inject slow:rank=1,ms=200 >/dev/null 2>&1 || fail "slow run"
has slow straggler "rank 1 took" || fail "rank 1 not reported as a straggler"
grep -q '"slowest_rank":1' "$WORK/slow/metrics.jsonl" || fail "metrics lack the per-rank step times"
echo "ok: rank 1 reported as a straggler"
echo "numerical faults: OK"
