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
"$ZAYA" score --model "$WORK/single/final" --tokens "$WORK/ids.json" --json "$WORK/single.score" >/dev/null
for layout in dp2 dp4 ep2 dp2ep2; do
  [[ $(losses "$WORK/$layout/metrics.jsonl" | wc -l) == 20 ]] || fail "$layout: expected 20 logged losses"
  paste <(losses "$WORK/single/metrics.jsonl") <(losses "$WORK/$layout/metrics.jsonl") |
    awk -v L="$layout" '{ d = $1 - $2; if (d < 0) d = -d; if (d > max) max = d }
      END { printf "%s: largest loss difference over 20 steps %.2e\n", L, max; exit !(max < 1e-3) }' ||
    fail "$layout: losses differ from the single-rank run by 1e-3 or more"
  v1=$(grep -o '"val_loss":[0-9.]*' "$WORK/single/metrics.jsonl" | tail -1 | cut -d: -f2)
  v2=$(grep -o '"val_loss":[0-9.]*' "$WORK/$layout/metrics.jsonl" | tail -1 | cut -d: -f2)
  awk -v a="$v1" -v b="$v2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3) }' ||
    fail "$layout: validation loss $v2 vs $v1"
  "$ZAYA" score --model "$WORK/$layout/final" --tokens "$WORK/ids.json" --json "$WORK/$layout.score" >/dev/null
  s1=$(grep -o '"mean_loss": *[0-9.]*' "$WORK/single.score" | grep -o '[0-9.]*$')
  s2=$(grep -o '"mean_loss": *[0-9.]*' "$WORK/$layout.score" | grep -o '[0-9.]*$')
  awk -v a="$s1" -v b="$s2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3) }' ||
    fail "$layout: final weights score $s2, single-rank weights $s1"
done
echo "dist layouts: OK"
