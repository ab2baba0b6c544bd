#!/usr/bin/env bash
# A full disk (docs/fault-tolerance.md, "A full disk"): training on a small
# tmpfs, in a mount namespace of its own (unshare: no root needed, nothing
# mounted outside this test).
#   1. Checkpoints that do not fit: after ft.max_failed_saves (2) failed saves
#      in a row the run stops, naming the newest checkpoint and the steps not
#      saved; that checkpoint verifies, metrics.jsonl holds whole records, the
#      plot is there, and the run continues from it on a disk with room.
#   2. No room even for metrics: every record that does not fit is dropped
#      with a warning, the file keeps whole JSON lines, the run reaches its end.
#   3. A torn last line of metrics.jsonl (a crash mid-write) is repaired on resume.
source "$(dirname "$0")/common.bash" "$@"

if ! unshare -rm true 2>/dev/null; then
  echo "SKIP: this machine allows no private mount namespace (unshare -rm), so no tmpfs can be mounted for the test"
  exit 77
fi

prepare_data 512
cat >"$WORK/train.toml" <<TOML
[model]
preset = "tiny"
num_blocks = 2
[data]
dir = "$WORK/data"
tokenizer = "$WORK/data/tokenizer.model"
[train]
micro_batch = 4
seq_len = 64
steps = 40
eval_every = 10
eval_batches = 2
log_every = 5
out_dir = "$WORK/small/run"
[schedule]
warmup_steps = 5
[checkpoint]
every = 10
TOML

# Every line of a JSON-lines file must be a whole JSON object.
whole_lines() {
  python3 -c 'import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    assert line.endswith("\n"), f"line {n} is not terminated"
    json.loads(line)' "$1" || fail "$1 holds a torn or invalid line"
}

# 1. A checkpoint is 5.2 MB: the first fits in 8 MB, the next two do not.
mkdir -p "$WORK/small"
rc=0
unshare -rm bash -c 'mount -t tmpfs -o size=8m tmpfs "$1/small" && "$2" train --config "$1/train.toml" >"$1/full.log" 2>&1; s=$?; cp -a "$1/small/run" "$1/after"; exit $s' \
  _ "$WORK" "$ZAYA" || rc=$?
[[ $rc == 1 ]] || { cat "$WORK/full.log"; fail "a run whose saves fail must stop with exit 1, got $rc"; }
grep -q "warning: save-failed: .*No space left on device" "$WORK/full.log" || fail "no warning for the first failed save"
# The step-30 save is asynchronous: its failure stops the run at the step whose poll sees it (30, or a
# little later when the write is still in flight), and every message names that step.
stop=$(sed -n 's/.*2 checkpoint save(s) in a row failed, stopping at step \([0-9]*\) (ft.max_failed_saves).*/\1/p' \
  "$WORK/full.log")
[[ -n $stop ]] && ((stop >= 30 && stop < 40)) || { cat "$WORK/full.log"; fail "the stop does not say why"; }
grep -q "note: the newest checkpoint of this run is step 10: steps 11..$stop are not saved" "$WORK/full.log" ||
  fail "the stop does not name the steps that are lost"
[[ $(ls "$WORK/after/checkpoints") == step_00000010 ]] || fail "checkpoints left: $(ls "$WORK/after/checkpoints")"
"$ZAYA" ckpt verify "$WORK/after/checkpoints/step_00000010" >/dev/null
whole_lines "$WORK/after/metrics.jsonl"
# log_every = 5: the last record is the last multiple of 5 that ran.
grep -q "\"step\":$((stop / 5 * 5)),\"loss\"" "$WORK/after/metrics.jsonl" ||
  fail "metrics stop before the last step that ran"
grep -q '<svg' "$WORK/after/loss.svg" || fail "no loss plot after the stop"
# On a disk with room the run continues from step 10; a torn last line (3.) is dropped on the way.
mkdir -p "$WORK/small"
cp -a "$WORK/after" "$WORK/small/run"
printf '{"step":31,"loss":4.5' >>"$WORK/small/run/metrics.jsonl"
"$ZAYA" train --config "$WORK/train.toml" --resume >"$WORK/resume.log" 2>&1 || { cat "$WORK/resume.log"; fail "resume"; }
grep -q "dropped 1 torn line" "$WORK/resume.log" || fail "the torn line was not reported"
grep -q "done: steps 11-40 (resumed from step 10)" "$WORK/resume.log" || fail "resumed summary: $(tail -3 "$WORK/resume.log")"
whole_lines "$WORK/small/run/metrics.jsonl"
[[ $(grep -c '"step":30,"loss"' "$WORK/small/run/metrics.jsonl") == 1 ]] || fail "steps logged twice after the resume"

# 2. Checkpoints off, and the disk full but for a few pages: metrics records are dropped, never torn.
sed -e 's/^every = 10/every = 0\nfinal = false/' -e 's/^log_every = 5/log_every = 1/' -e "s|$WORK/small/run|$WORK/tiny/run|" \
  "$WORK/train.toml" >"$WORK/nockpt.toml"
mkdir -p "$WORK/tiny"
rc=0
unshare -rm bash -c 'mount -t tmpfs -o size=1m tmpfs "$1/tiny" && { dd if=/dev/zero of="$1/tiny/filler" bs=4k count=253 2>/dev/null; "$2" train --config "$1/nockpt.toml" >"$1/meta.log" 2>&1; s=$?; cp -a "$1/tiny/run" "$1/meta-run"; exit $s; }' \
  _ "$WORK" "$ZAYA" || rc=$?
# The run reaches its end; only the final weights (2.4 MB) cannot be written.
grep -q "step     40/40" "$WORK/meta.log" || { cat "$WORK/meta.log"; fail "the run did not reach its last step"; }
[[ $rc == 1 ]] || fail "the final weights cannot fit: expected exit 1, got $rc"
grep -q "warning: .*metrics.jsonl: a record could not be written" "$WORK/meta.log" ||
  { cat "$WORK/meta.log"; fail "no warning for the dropped metric records"; }
whole_lines "$WORK/meta-run/metrics.jsonl"
echo "disk full: OK"
