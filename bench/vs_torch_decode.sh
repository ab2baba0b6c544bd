#!/usr/bin/env bash
# Decoding, `zaya bench infer` against transformers' generate (bf16 weights both sides; greedy; a static
# cache where transformers takes one for ZAYA, else its dynamic cache, said in the summary), per batch
# (BATCHES, default "1 8") and prompt length (PROMPTS, default "128 1024"): the decode step time at that
# context (zaya: the mean of DECODE_STEPS steps; transformers: the mean time between its first and last
# of DECODE_STEPS + 1 new tokens, noted by a streamer), the prefill of one sequence, and at batch 1 the DRAM roofline (weight and KV bytes
# read per step / STREAM triad bandwidth, both measured by zaya bench infer) (docs/performance.md
# "Side by side with PyTorch 2.x").
#
#   bench/vs_torch_decode.sh [SHAPE]
#   bench/vs_torch_decode.sh small
#   ROUNDS=1 bench/vs_torch_decode.sh 8b
# SHAPE and the environment: bench/vs_torch_common.bash.
source "$(dirname "$0")/vs_torch_common.bash"
shape=${1:-small}
batches=${BATCHES:-1 8}
prompts=${PROMPTS:-128 1024}
steps=${DECODE_STEPS:-16}
out=${OUT:-runs/bench/vs_torch_decode_$shape}
fresh_dir "$out"
versions
make_model "$shape" "$out"
write_meta "$out" "shape=$SHAPE_DESC" "threads=$threads" "rounds=$rounds" "batches=[${batches// /,}]" \
  "prompts=[${prompts// /,}]"
# shellcheck disable=SC2086 # the lists are word-split on purpose
for r in $(seq "$rounds"); do
  "$zaya" bench infer --model "$MODEL" --dtype bf16 --prefill $prompts --batch $batches --context $prompts \
    --decode-steps "$steps" --threads "$threads" --no-working-set --json "$out/zaya_round_$r.json" \
    >"$out/zaya_round_$r.log"
  for b in $batches; do
    for p in $prompts; do
      torch_run "torch_b${b}_p${p}_$r" "${TORCH_TIMEOUT:-1200}" decode --model "$MODEL" --batch "$b" --prompt "$p" \
        --new "$steps"
    done
  done
done
"$PY" bench/vs_torch.py summary decode "$out"
