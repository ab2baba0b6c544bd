#!/usr/bin/env bash
# The main job end to end on a small scale: tokenizer, shards, training with
# validation, metrics, plot and weights, then generate, score and info.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 1024
write_config train.toml 40
"$ZAYA" train --config "$WORK/train.toml" | tee "$WORK/train.log"

for f in metrics.jsonl loss.svg config.toml final/config.json final/model.safetensors final/tokenizer.model; do
  [[ -s $WORK/run/$f ]] || fail "missing output $f"
done
grep -q '<svg' "$WORK/run/loss.svg" || fail "loss.svg is not SVG"
grep -q '"val_loss"' "$WORK/run/metrics.jsonl" || fail "no validation loss in metrics"
grep -q '"routing":\[{"layer":1,"load":\[' "$WORK/run/metrics.jsonl" || fail "no routing statistics in metrics"
# The loss must fall: first logged train loss vs last.
first=$(grep -m1 '"loss"' "$WORK/run/metrics.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
last=$(grep '"loss"' "$WORK/run/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([0-9.]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "loss did not fall: $first -> $last"
grep -q "done: 40 steps" "$WORK/train.log" || fail "no summary line"

"$ZAYA" generate --model "$WORK/run/final" --prompt "In the beginning" --max-new-tokens 20 --seed 3 >"$WORK/gen1.txt"
"$ZAYA" generate --model "$WORK/run/final" --prompt "In the beginning" --max-new-tokens 20 --seed 3 >"$WORK/gen2.txt"
cmp -s "$WORK/gen1.txt" "$WORK/gen2.txt" || fail "generation with one seed is not reproducible"
[[ $(wc -c <"$WORK/gen1.txt") -gt 20 ]] || fail "generation printed too little: $(cat "$WORK/gen1.txt")"
"$ZAYA" generate --model "$WORK/run/final" --prompt "And" --temperature 0 --max-new-tokens 5 >/dev/null

echo '[[2, 100, 200, 300, 1], [2, 7, 8]]' >"$WORK/tokens.json"
"$ZAYA" score --model "$WORK/run/final" --tokens "$WORK/tokens.json" --json "$WORK/scores.json" \
  --dump-logits "$WORK/logits.json" | tee "$WORK/score.log"
grep -q "sequence 1: 2 tokens scored" "$WORK/score.log" || fail "score output"
grep -q '"mean_loss"' "$WORK/scores.json" || fail "score JSON"
[[ $(head -c 2 "$WORK/logits.json") == "[[" ]] || fail "logits JSON"

"$ZAYA" info --preset zaya1-base --json "$WORK/info.json" | tee "$WORK/info.log"
grep -q "total (8.84B)" "$WORK/info.log" || fail "zaya1-base total parameters"
grep -q "without the embedding (8.30B)" "$WORK/info.log" || fail "zaya1-base parameters without embedding"
grep -q "active per token, without the embedding (0.75B)" "$WORK/info.log" || fail "zaya1-base active parameters"
# A small model in the unit of its total, not "0.001B" (red-team L14): the four counts share it.
"$ZAYA" info --model "$WORK/run/final" >"$WORK/info_small.log"
units=$(grep -Eo "\([0-9.]+[A-Z]?\)$" "$WORK/info_small.log" | grep -Eo "[KMB]?\)$" | sort -u)
[[ $units == "K)" || $units == "M)" ]] || fail "small model's counts not in one unit K or M: $(cat "$WORK/info_small.log")"
echo "main job: OK"
