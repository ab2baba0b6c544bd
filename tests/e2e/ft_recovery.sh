#!/usr/bin/env bash
# The supervisor recovers from each fault class and the run ends exactly as a
# fault-free run: a killed rank, a hung rank, a preemption (SIGTERM on a rank),
# a damaged newest checkpoint followed by a crash, and a stop request to the
# supervisor itself. Bitwise: same losses, gradient norms, validation losses
# and final weights. Prints the recovery time of each class.
source "$(dirname "$0")/common.bash" "$@"
write_ft_config base.toml
LAUNCH=("$ZAYA" launch -n 2 --mpirun-arg=--oversubscribe --mpirun-arg=--allow-run-as-root
        --mpirun-arg=-x --mpirun-arg=OMP_NUM_THREADS=1 --backoff 0.2 --min-step-timeout 4)
curve() { grep -o '"loss":[0-9.e+-]*\|"grad_norm":[0-9.e+-]*\|"val_loss":[0-9.e+-]*' "$1/metrics.jsonl"; }
same_as_ref() {
  diff <(curve "$WORK/ref") <(curve "$WORK/$1") >/dev/null || fail "$1: the loss curve differs from the fault-free run"
  cmp -s "$WORK/ref/final/model.safetensors" "$WORK/$1/final/model.safetensors" || fail "$1: final weights differ"
}
event() { grep -c "\"event\":\"$2\"" "$WORK/$1/incidents.jsonl" || true; }
recovery() { grep '"event":"recovered"' "$WORK/$1/incidents.jsonl" | grep -o '"seconds":[0-9.]*' | head -1 | cut -d: -f2; }

"${LAUNCH[@]}" -- train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/ref" >/dev/null 2>&1 ||
  fail "fault-free run"
for fault in "kill kill:rank=1,step=7 crash" "hang hang:rank=1,step=7 hang" "preempt preempt:rank=0,step=7 preempted" \
             "corrupt corrupt-ckpt:step=6;kill:rank=0,step=8 crash checkpoint.async=false"; do
  # A fourth field is one more --set: the damaged checkpoint must be published
  # (synchronously) before the kill, or the restart never meets it.
  set -- $fault
  name=$1 spec=$2 expected=$3 extra=(${4:+--set "$4"})
  "${LAUNCH[@]}" --inject "$spec" -- train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/$name" "${extra[@]}" \
    >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "$name: the supervisor gave up"; }
  [[ $(event "$name" "$expected") -ge 1 ]] || fail "$name: no '$expected' incident"
  [[ $(event "$name" finished) == 1 ]] || fail "$name: did not finish"
  same_as_ref "$name"
  echo "ok: $name ($spec): detected as $expected, recovered in $(recovery "$name") s, same run bit for bit"
done
[[ -d $WORK/corrupt/checkpoints/step_00000006.damaged ]] || fail "corrupt: the damaged checkpoint was not set aside"

# A stop request to the supervisor: the job checkpoints and stops (75); a new launch finishes the run.
"${LAUNCH[@]}" --inject slow:rank=0,ms=300 -- train --config "$WORK/base.toml" --quiet \
  --set train.out_dir="$WORK/sigterm" >"$WORK/sigterm.log" 2>&1 &
sup=$!
for _ in $(seq 100); do [[ -d $WORK/sigterm/checkpoints/step_00000003 ]] && break; sleep 0.2; done
kill -TERM $sup
rc=0; wait $sup || rc=$?
[[ $rc == 75 ]] || { cat "$WORK/sigterm.log"; fail "supervisor exit code $rc after SIGTERM, expected 75"; }
grep -q '"event":"stopped"' "$WORK/sigterm/incidents.jsonl" || fail "no 'stopped' incident"
"${LAUNCH[@]}" -- train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/sigterm" --resume \
  >"$WORK/sigterm2.log" 2>&1 || { cat "$WORK/sigterm2.log"; fail "relaunch after SIGTERM"; }
same_as_ref sigterm
echo "ok: SIGTERM to the supervisor: checkpoint, exit 75, relaunch continues bit for bit"
echo "fault recovery: OK"
