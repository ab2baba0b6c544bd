#!/usr/bin/env bash
# LoRA fine-tuning at ZAYA1-8B's exact shapes and dtype on one CPU box
# (docs/performance.md "LoRA at ZAYA1-8B shapes"):
#   1. `zaya ckpt random` writes a randomly initialised zaya1-8b model
#      directory in bf16, native layout, tensor by tensor (8.84B parameters:
#      17.7 GB; its float32 copy, 35 GB, never exists);
#   2. one `zaya bench train` process fine-tunes it with LoRA (rank RANK, the
#      five attention targets, train.precision = bf16: the frozen base lives
#      in bf16 only, no base gradients) on synthetic random tokens of the 8B
#      vocabulary (262,144 real ids; the bundled 4,096-piece tokenizer does
#      not match it): peak resident set, tokens/s, start-up and first step;
#   3. `zaya plan` states what full fine-tuning at 8B would need (it does not
#      fit here).
# The checkpoint is deleted at the end unless KEEP=1.
#
#   bench/lora_8b.sh [SEQ] [STEPS] [RANK] [--set k=v ...]
#   bench/lora_8b.sh 256 3 8
#   CKPT=/data/zaya1-8b-random bench/lora_8b.sh 512 3 16 --set train.recompute=full
set -euo pipefail
cd "$(dirname "$0")/.."
seq=${1:-256} steps=${2:-3} rank=${3:-8}
shift $(($# < 3 ? $# : 3))
overrides=("$@")
zaya=${ZAYA:-build/zaya}
out=${OUT:-runs/bench}
ckpt=${CKPT:-$out/zaya1-8b-random-bf16}
threads=${THREADS:-$(nproc)}
mkdir -p "$out"
[[ -x $zaya ]] || { echo "build zaya first (cmake --build build)" >&2; exit 1; }
free -g
if [[ ! -f $ckpt/config.json ]]; then
  /usr/bin/time -f "ckpt random: %e s, peak RSS %M KB" \
    "$zaya" ckpt random --preset zaya1-8b --out "$ckpt" --dtype bf16 --layout native --seed 1
fi
du -sh "$ckpt"
/usr/bin/time -f "bench train: %e s wall, peak RSS %M KB" \
  "$zaya" bench train --preset zaya1-8b --set model.init_from="$ckpt" --set train.precision=bf16 \
  --set lora.rank="$rank" --set lora.alpha=$((2 * rank)) --set lora.dropout=0.05 --micro-batch 1 --seq-len "$seq" --steps "$steps" --warmup 1 \
  --threads "$threads" "${overrides[@]}" --json "$out/lora_8b_${seq}_r${rank}.json"
"$zaya" plan --model zaya1-8b --dtype bf16 --micro-batch 1 --seq-len "$seq" --recompute full --no-tradeoff \
  --top-gemms 0 --json "$out/full_ft_8b_plan.json" | grep -A1 "# memory per device"
[[ ${KEEP:-0} == 1 ]] || rm -rf "$ckpt"
