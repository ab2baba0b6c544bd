#!/usr/bin/env bash
# model.init_from: a fresh run starts from a model directory's weights. A tiny
# run trains, a second run starts from its final/ and its first loss lies in
# the first run's final-loss region, far below a fresh initialisation's
# ln(vocab) (which the second run without init_from shows); a directory of
# another model is refused naming the key and both values.
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config base.toml 60
"$ZAYA" train --config "$WORK/base.toml" --quiet >/dev/null
[[ -f $WORK/run/final/config.json ]] || fail "no final/ model directory"
last=$(losses "$WORK/run/metrics.jsonl" | tail -1)

"$ZAYA" train --config "$WORK/base.toml" --set model.init_from="$WORK/run/final" --set train.out_dir="$WORK/again" \
  --set train.steps=5 >"$WORK/again.log" 2>&1 || { cat "$WORK/again.log"; fail "init_from run"; }
grep -q "starting from the weights of $WORK/run/final" "$WORK/again.log" || fail "no start-up line for init_from"
first=$(losses "$WORK/again/metrics.jsonl" | head -1)
"$ZAYA" train --config "$WORK/base.toml" --quiet --set train.out_dir="$WORK/fresh" --set train.steps=5 >/dev/null
fresh=$(losses "$WORK/fresh/metrics.jsonl" | head -1)
echo "first run's final loss $last; second run's first loss $first (from init_from), $fresh (fresh); ln 512 = 6.24"
awk -v a="$first" -v l="$last" -v f="$fresh" 'BEGIN { exit !(a < l + 0.5 && a < f - 1.0 && f > 5.0) }' ||
  fail "the init_from run's first loss $first is not the first run's final region ($last) below a fresh start ($fresh)"
grep -q '^init_from = "'"$WORK/run/final"'"' "$WORK/again/config.toml" || fail "config.toml lacks model.init_from"

expect_error 1 "model.init_from = '$WORK/run/final' holds another model.*hidden_size: 64 vs 128" -- \
  "$ZAYA" train --config "$WORK/base.toml" --quiet --set model.init_from="$WORK/run/final" \
  --set model.hidden_size=64 --set train.out_dir="$WORK/bad"
expect_error 1 "model.init_from = '$WORK/nothing' is not a model directory" -- \
  "$ZAYA" train --config "$WORK/base.toml" --quiet --set model.init_from="$WORK/nothing" --set train.out_dir="$WORK/bad2"
echo "ok: init_from"
