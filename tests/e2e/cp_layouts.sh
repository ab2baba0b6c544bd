#!/usr/bin/env bash
# Context parallelism trains the same model: for one global batch of 4
# sequences of 64 tokens, 1 rank, cp=2, cp=4, dp=2 x cp=2 and ep=2 x cp=2 log
# the same losses for 12 steps (float32 sums in different orders: |difference|
# < 1e-3 nats), the same validation loss, and final weights that score the
# same. A checkpoint written by cp=2 continues on 2 plain data-parallel ranks
# (parameters are replicated over cp, so any layout reads it).
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 12
sed -i 's/^micro_batch = 8/micro_batch = 4\nthreads = 1/' "$WORK/base.toml"
printf '[checkpoint]\nevery = 6\n' >>"$WORK/base.toml"

run() {  # name ranks micro_batch ep cp [extra args]
  local name=$1 np=$2 mb=$3 ep=$4 cp=$5
  shift 5
  "${MPIRUN[@]}" -np "$np" "$ZAYA" train --config "$WORK/base.toml" --quiet --set "train.micro_batch=$mb" \
    --set "parallel.ep=$ep" --set "parallel.cp=$cp" --set "train.out_dir=$WORK/$name" --set train.log_every=1 \
    "$@" >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "layout $name failed"; }
}
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/single" --set train.log_every=1 \
  >"$WORK/single.log" 2>&1 || { cat "$WORK/single.log"; fail "single-rank run failed"; }
run cp2 2 4 1 2
run cp4 4 4 1 4
run dp2cp2 4 2 1 2
run ep2cp2 4 2 2 2

echo '[[2, 10, 20, 30, 40, 50, 60, 70]]' >"$WORK/ids.json"
for layout in cp2 cp4 dp2cp2 ep2cp2; do expect_same_training single "$layout" "$WORK/ids.json" 12; done

# The cp=2 checkpoint at step 6 continues on dp=2 (no cp) and ends like the rest.
"$ZAYA" ckpt inspect "$WORK/cp2/checkpoints/step_00000006" | grep -q "written by 2 rank(s) (dp 1 x ep 1 x cp 2)" ||
  fail "the checkpoint does not record the cp layout"
mkdir -p "$WORK/cp2_then_dp2"
cp -r "$WORK/cp2/checkpoints" "$WORK/cp2_then_dp2/"
rm -rf "$WORK/cp2_then_dp2/checkpoints/step_00000012"
cp "$WORK/cp2/metrics.jsonl" "$WORK/cp2_then_dp2/"
run cp2_then_dp2 2 2 1 1 --resume
expect_same_training single cp2_then_dp2 "$WORK/ids.json" 12

# A sequence length that does not split into 2 * cp chunks is refused by name.
expect_error 1 "train.seq_len = 60 does not fit parallel.cp = 4" -- \
  "$ZAYA" train --config "$WORK/base.toml" --set parallel.cp=4 --set train.seq_len=60
echo "cp layouts: OK"
