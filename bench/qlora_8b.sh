#!/usr/bin/env bash
# QLoRA memory at ZAYA1-8B widths (docs/training.md "LoRA over a quantized
# base"): `zaya bench train` of LoRA (rank 8, the five attention targets and
# the two expert targets, train.precision = bf16, 1 x SEQ synthetic tokens)
# over a zaya1-8b-shaped model cut to 2 and 4 layers (hidden 2048, 16 experts
# of 2048, the 262,144-row embedding), its experts held as [lora] base_dtype
# = float (bf16) and mxfp4 (quantized at load from the seed's weights); the
# peak resident sets of the two depths give the bytes per layer and the rest,
# extrapolated to ZAYA1-8B's 40 layers.
#
#   bench/qlora_8b.sh [SEQ]
set -euo pipefail
cd "$(dirname "$0")/.."
seq=${1:-256}
zaya=${ZAYA:-build/zaya}
out=${OUT:-runs/bench}
mkdir -p "$out"
targets='["q_proj","k_proj","v_proj_current","v_proj_delayed","o_proj","mlp.experts.gate_up_proj","mlp.experts.down_proj"]'
for dt in float mxfp4; do
  for layers in 2 4; do
    "$zaya" bench train --preset zaya1-8b --set model.num_blocks=$layers --set train.precision=bf16 \
      --set lora.rank=8 --set lora.alpha=16 --set "lora.targets=$targets" --set lora.base_dtype=$dt \
      --micro-batch 1 --seq-len "$seq" --steps 1 --warmup 1 --threads "${THREADS:-2}" \
      --json "$out/qlora_8b_${dt}_${layers}.json" | grep -E "parameters|memory per rank"
  done
done
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
for dt in ("float", "mxfp4"):
    r = {L: json.load(open(f"{d}/qlora_8b_{dt}_{L}.json")) for L in (2, 4)}
    rss = {L: r[L]["peak_rss_bytes_per_rank"] / 1e9 for L in r}
    per_layer = (rss[4] - rss[2]) / 2
    rest = rss[2] - 2 * per_layer
    print(f"{dt:6s}: peak RSS {rss[2]:.2f} GB (2 layers), {rss[4]:.2f} GB (4 layers): {per_layer:.3f} GB per layer "
          f"+ {rest:.2f} GB -> 40 layers {rest + 40 * per_layer:.1f} GB; quantized experts "
          f"{r[4].get('quant_param_bytes', 0) / 1e9:.3f} GB at 4 layers")
PY
