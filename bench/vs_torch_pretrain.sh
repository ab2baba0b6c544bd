#!/usr/bin/env bash
# Pretraining step, zaya.cpp against transformers' ZayaForCausalLM on PyTorch 2.x (docs/performance.md
# "Side by side with PyTorch 2.x"): the same model directory, batch, sequence length, threads and
# optimizer; zaya f32 and bf16 (`zaya bench train`), PyTorch eager f32, eager bf16 autocast,
# torch.compile f32 and bf16 autocast (MODES). OPTIM=adamw (default: AdamW on every parameter, both
# sides) or muon (zaya: Muon on hidden matrices, experts' included; PyTorch: torch.optim.Muon on the
# 2-D hidden matrices, AdamW on the stacked 3-D experts, which torch.optim.Muon refuses).
#
#   bench/vs_torch_pretrain.sh [SHAPE] [MICRO_BATCH] [SEQ] [STEPS]
#   bench/vs_torch_pretrain.sh small 8 256 3
#   ROUNDS=1 MODES="f32 bf16" bench/vs_torch_pretrain.sh 8b 1 512 2
# The compiled modes run in the first round only (compiling takes minutes a process on a small CPU;
# COMPILE_EVERY_ROUND=1 runs them in every round). TORCH_TIMEOUT (default 1200 s) bounds each PyTorch
# process. SHAPE and the rest of the environment: bench/vs_torch_common.bash.
source "$(dirname "$0")/vs_torch_common.bash"
shape=${1:-small} batch=${2:-8} seq=${3:-256} steps=${4:-3}
modes=${MODES:-f32 bf16 compile compile-bf16}
optim=${OPTIM:-adamw}
out=${OUT:-runs/bench/vs_torch_pretrain_$shape}
fresh_dir "$out"
versions
make_model "$shape" "$out"
muon=false
[[ $optim == muon ]] && muon=true
write_meta "$out" "shape=$SHAPE_DESC" "batch=$batch" "seq=$seq" "threads=$threads" "rounds=$rounds" \
  "recipe=optimizer $optim, $steps timed steps after 1 (eager) or 2 (compiled) untimed"
for r in $(seq "$rounds"); do
  for p in f32 bf16; do
    "$zaya" bench train "${ZARGS[@]}" --micro-batch "$batch" --seq-len "$seq" --steps "$steps" --warmup 1 \
      --threads "$threads" --set "train.precision=$p" --set "optim.muon=$muon" \
      --json "$out/zaya_${p}_$r.json" >"$out/zaya_${p}_$r.log"
  done
  for m in $modes; do
    warm=1
    if [[ $m == compile* ]]; then
      ((r == 1 || ${COMPILE_EVERY_ROUND:-0})) || continue # minutes of compiling per process on a small CPU
      warm=2
    fi
    torch_run "torch_${m}_$r" "${TORCH_TIMEOUT:-1200}" train --model "$MODEL" --mode "$m" --batch "$batch" \
      --seq "$seq" --steps "$steps" --warmup "$warm" --optim "$optim"
  done
done
"$PY" bench/vs_torch.py summary pretrain "$out"
