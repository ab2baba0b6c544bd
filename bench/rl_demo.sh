#!/usr/bin/env bash
# The RL walk-through of docs/rl.md, end to end: a small verifiable task
# (tools/rl_task.py: reverse two words, rendered as chat), a short SFT warm
# start of a 2-block `tiny` model on a mixture that mostly copies (so the
# model mostly copies where it is asked to reverse), then GRPO
# (configs/rl-tiny.toml) and `zaya report` of the run. Prints the held-out
# greedy reward before and after, and the wall time of each stage.
#
#   bench/rl_demo.sh [BUILD_DIR=build] [OUT=runs/rl] [extra `zaya rl` arguments, e.g. --set train.steps=40]
set -euo pipefail
build=${1:-build} out=${2:-runs/rl}
shift $(($# < 2 ? $# : 2))
zaya=$build/zaya
mkdir -p "$out"
t0=$(date +%s)
python3 tools/rl_task.py make "$out" --words 2 --vocab 20 --copy-share 0.8 --sft 3000 --prompts 160 --eval 40
# The corpus with the task's chats: the turn markers and the words become few pieces.
"$zaya" data tokenizer --corpus data/kjv/kjv.txt --corpus "$out/chat.txt" --vocab-size 1024 --max-sentences 20000 \
  --out "$out/tok" >/dev/null
rm -rf "$out/sft"
"$zaya" data sft --corpus "$out/sft.jsonl" --tokenizer "$out/tok.model" --out "$out/sft" --val-fraction 0.05 --quiet \
  >/dev/null
rm -rf "$out/sft-run" "$out/rl-run"
t1=$(date +%s)
"$zaya" train --config configs/rl-tiny-sft.toml --quiet --set data.dir="\"$out/sft\"" \
  --set data.tokenizer="\"$out/tok.model\"" --set train.out_dir="\"$out/sft-run\"" >/dev/null
t2=$(date +%s)
"$zaya" rl --config configs/rl-tiny.toml --set model.init_from="\"$out/sft-run/final\"" \
  --set data.tokenizer="\"$out/tok.model\"" --set rl.prompts="\"$out/prompts.jsonl\"" \
  --set rl.eval_prompts="\"$out/eval.jsonl\"" --set train.out_dir="\"$out/rl-run\"" "$@" | tee "$out/rl.log"
t3=$(date +%s)
"$zaya" report "$out/rl-run" --out "$out/report" >/dev/null
echo "data $((t1 - t0)) s, SFT warm start $((t2 - t1)) s, RL $((t3 - t2)) s; plots in $out/report (rl_reward.svg)"
