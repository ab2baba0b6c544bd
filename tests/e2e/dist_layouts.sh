#!/usr/bin/env bash
# Data and expert parallelism give the same training run: for one global batch
# of 8 sequences, 1 rank, dp=2, dp=4, ep=2 and dp=2 x ep=2 log the same losses
# for 20 steps (float32 sums in different orders: |difference| < 1e-3 nats),
# the same validation loss, and final weights (experts gathered from their ep
# ranks) that score the same.
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 20
sed -i 's/^micro_batch = 8/micro_batch = 8\nthreads = 1/' "$WORK/base.toml"
# Float32 throughout, Newton-Schulz too: with optim.ns_dtype = "auto" a CPU
# with AMX rounds Muon's iterate to bf16, where the layouts' last-bit
# differences flip roundings, and after 20 steps the final weights scored
# 1.3e-3 apart (dp2), beyond what this comparison of float32 sums allows.
printf '[optim]\nns_dtype = "f32"\n' >>"$WORK/base.toml"

run() {  # name ranks micro_batch ep
  local out=$WORK/$1
  "${MPIRUN[@]}" -np "$2" "$ZAYA" train --config "$WORK/base.toml" --quiet --set "train.micro_batch=$3" \
    --set "parallel.ep=$4" --set "train.out_dir=$out" --set train.log_every=1 >"$WORK/$1.log" 2>&1 ||
    { cat "$WORK/$1.log"; fail "layout $1 failed"; }
}
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/single" --set train.log_every=1 \
  >"$WORK/single.log" 2>&1 || { cat "$WORK/single.log"; fail "single-rank run failed"; }
run dp2 2 4 1
run dp4 4 2 1
run ep2 2 4 2
run dp2ep2 4 2 2

echo '[[2, 10, 20, 30, 40, 50, 60, 70]]' >"$WORK/ids.json"
for layout in dp2 dp4 ep2 dp2ep2; do expect_same_training single "$layout" "$WORK/ids.json" 20; done
echo "dist layouts: OK"
