#!/usr/bin/env bash
# LoRA fine-tuning step, `zaya bench train` with [lora] against PEFT on transformers' ZayaForCausalLM
# (docs/performance.md "Side by side with PyTorch 2.x"): the same frozen base (one model directory),
# targets (TARGETS, default every one zaya takes: the five attention projections, the router's four
# matrices, both expert matrices), rank, alpha = 2 rank, dropout 0 (expert targets refuse dropout on
# both sides), batch, sequence length and threads; AdamW on the adapters. zaya f32 and bf16 (the frozen
# base in bf16), PyTorch eager f32 and bf16 autocast (MODES; add compile / compile-bf16 to try
# torch.compile on the PEFT model).
#
#   bench/vs_torch_lora.sh [SHAPE] [MICRO_BATCH] [SEQ] [STEPS] [RANK]
#   bench/vs_torch_lora.sh small 8 256 3 8
#   ROUNDS=1 bench/vs_torch_lora.sh 8b 1 512 2 16
# SHAPE and the environment: bench/vs_torch_common.bash.
source "$(dirname "$0")/vs_torch_common.bash"
shape=${1:-small} batch=${2:-8} seq=${3:-256} steps=${4:-3} rank=${5:-8}
modes=${MODES:-f32 bf16}
targets=${TARGETS:-q_proj,k_proj,v_proj_current,v_proj_delayed,o_proj,mlp.gate.down_proj,mlp.gate.router_mlp.fc1,mlp.gate.router_mlp.fc2,mlp.gate.router_mlp.out_proj,mlp.experts.gate_up_proj,mlp.experts.down_proj}
out=${OUT:-runs/bench/vs_torch_lora_$shape}
fresh_dir "$out"
versions
make_model "$shape" "$out"
toml_targets="[\"${targets//,/\",\"}\"]"
write_meta "$out" "shape=$SHAPE_DESC" "batch=$batch" "seq=$seq" "threads=$threads" "rounds=$rounds" \
  "recipe=LoRA rank $rank, alpha $((2 * rank)), targets $targets, AdamW on the adapters, $steps timed steps"
for r in $(seq "$rounds"); do
  for p in f32 bf16; do
    "$zaya" bench train "${ZARGS[@]}" --micro-batch "$batch" --seq-len "$seq" --steps "$steps" --warmup 1 \
      --threads "$threads" --set "train.precision=$p" --set "lora.rank=$rank" --set "lora.alpha=$((2 * rank))" \
      --set "lora.dropout=0" --set "lora.targets=$toml_targets" --json "$out/zaya_${p}_$r.json" \
      >"$out/zaya_${p}_$r.log"
  done
  for m in $modes; do
    warm=1
    [[ $m == compile* ]] && warm=2
    torch_run "torch_${m}_$r" "${TORCH_TIMEOUT:-1200}" train --model "$MODEL" --mode "$m" --batch "$batch" \
      --seq "$seq" --steps "$steps" --warmup "$warm" --lora "$rank" --targets "$targets"
  done
done
"$PY" bench/vs_torch.py summary lora "$out"
