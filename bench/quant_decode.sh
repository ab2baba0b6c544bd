#!/usr/bin/env bash
# Quantized decode weights (docs/inference.md, "Quantized experts" and "Every
# matrix in MXFP4"), side by side in one run on this machine:
#  1. `zaya bench infer` decode tokens/s and x DRAM roofline at batch 1 and 8,
#     contexts CONTEXTS (default 128,1024), with bf16, int8 (attention, experts
#     and LM head Q8_0), mxfp4 and fp8 (the routed experts only, packed in
#     memory; the rest bf16), int8-mxfp4 (int8's Q8_0 attention and LM head
#     beside MXFP4 experts), mxfp4-all (llama.cpp-style 4-bit: attention,
#     router down, experts and LM head MXFP4) and mxfp4-all-q8head (its LM head
#     Q8_0) weights; mxfp4 and int8-mxfp4 twice, with int8-quantized
#     activations (ops/matvec_mxfp4_q8.h, the default) and with float32 ones
#     (ZAYA_MXFP4_ACTIVATIONS=float, ops/matvec_lowbit.h: the `-fa` columns);
#     the FP8 ones twice too, with bf16-rounded activations (ops/matvec_fp8_bf16.h,
#     the default) and with float32 ones (ZAYA_FP8_ACTIVATIONS=float: fp8-fa).
#     RUNS rounds (default 3) interleaved so that a change of load hits every
#     configuration alike, the best round of each reported;
#  2. (presets only, STEPS > 0) perplexity of held-out text (the last 200 KB of
#     the KJV corpus) with each configuration, on a tiny model trained here for
#     STEPS steps on the rest.
# SHAPE: a preset's random weights (small, tiny), or 8b: ZAYA1-8B's layer widths
# (bench/vs_torch_common.bash's make_model: hidden 2048, 16 experts of width
# 2048, LAYERS blocks, default 2, vocabulary 32768, written by transformers;
# MODEL=DIR reuses a directory written before).
# CONFIGS=LABELS (space- or comma-separated) keeps only those configurations, e.g. CONFIGS=fp8,fp8-fa (the FP8
# kernels old vs new) or CONFIGS="bf16 int8 int8-mxfp4 mxfp4-all mxfp4-all-q8head"; rows follow the first kept.
# ZAYA=BIN runs BIN (default build/zaya); ZAYA_BASE=BIN runs every configuration with BIN too, in the same
# interleaved rounds (labels LABEL.base: a change measured against the binary before it under the same load,
# with LABEL/LABEL.base among the ratios).
#   [THREADS=1] [RUNS=3] [CONTEXTS=128,1024] [CONFIGS=...] [ZAYA_BASE=BIN] bench/quant_decode.sh [SHAPE] [STEPS] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
shape=${1:-small} steps=${2:-200} dir=${3:-runs/bench/quant_$shape}
zaya=${ZAYA:-build/zaya}
runs=${RUNS:-3}
# label:dtype:activations (float: ZAYA_MXFP4_ACTIVATIONS and ZAYA_FP8_ACTIVATIONS float; else their defaults)
configs=(bf16:bf16: int8:int8: mxfp4:mxfp4:int8 mxfp4-fa:mxfp4:float int8-mxfp4:int8-mxfp4:int8
  int8-mxfp4-fa:int8-mxfp4:float fp8:fp8: fp8-fa:fp8:float mxfp4-all:mxfp4-all:int8
  mxfp4-all-q8head:mxfp4-all-q8head:int8)
if [[ -n ${CONFIGS:-} ]]; then
  wanted=" ${CONFIGS//,/ } "
  kept=()
  for c in "${configs[@]}"; do [[ $wanted == *" ${c%%:*} "* ]] && kept+=("$c"); done
  ((${#kept[@]} > 0)) || { echo "CONFIGS='$CONFIGS' names no configuration" >&2; exit 2; }
  configs=("${kept[@]}")
fi
mkdir -p "$dir"
if [[ $shape == 8b ]]; then
  if [[ -z ${MODEL:-} ]]; then
    # shellcheck source=bench/vs_torch_common.bash
    source bench/vs_torch_common.bash
    make_model 8b "$dir"
  fi
  source_args=(--model "$MODEL")
  steps=0
else
  source_args=(--preset "$shape")
fi
labels=()
for c in "${configs[@]}"; do labels+=("${c%%:*}"); done
binaries=("$zaya")
if [[ -n ${ZAYA_BASE:-} ]]; then
  binaries+=("$ZAYA_BASE")
  for c in "${configs[@]}"; do labels+=("${c%%:*}.base"); done
fi
echo "== decode, $shape, $runs interleaved rounds of ${labels[*]} (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq 1 "$runs"); do
  for c in "${configs[@]}"; do
    IFS=: read -r label dt act <<<"$c"
    fp8_act=bf16
    [[ $act == float ]] && fp8_act=float
    for bin in "${binaries[@]}"; do
      out=$label
      [[ $bin == "$zaya" ]] || out=$label.base
      ZAYA_MXFP4_ACTIVATIONS=${act:-int8} ZAYA_FP8_ACTIVATIONS=$fp8_act "$bin" bench infer "${source_args[@]}" \
        --dtype "$dt" --threads "${THREADS:-1}" --no-prefill --no-working-set --batch 1,8 \
        --context "${CONTEXTS:-128,1024}" --decode-steps 32 --warmup 4 --json "$dir/decode_${out}_$r.json" >/dev/null
    done
  done
done
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir" "$runs" "${labels[@]}" <<'PY'
import json, sys
d, runs, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = {k: [json.load(open(f"{d}/decode_{k}_{r}.json")) for r in range(1, runs + 1)] for k in labels}
def best(k, i):
    return max(res[k], key=lambda x: x["decode"][i]["tokens_per_second"])["decode"][i]
ratios = [("mxfp4", "int8"), ("mxfp4", "bf16"), ("int8-mxfp4", "int8"), ("int8-mxfp4", "bf16"),
          ("mxfp4", "mxfp4-fa"), ("int8-mxfp4", "int8-mxfp4-fa"), ("fp8", "fp8-fa"), ("mxfp4-all", "int8"),
          ("mxfp4-all", "bf16"), ("mxfp4-all-q8head", "int8"), ("mxfp4-all-q8head", "bf16")]
ratios = [(a, b) for a, b in ratios if a in labels and b in labels]
ratios += [(a + ".base", b + ".base") for a, b in ratios if a + ".base" in labels and b + ".base" in labels]
ratios += [(k[:-5], k) for k in labels if k.endswith(".base")]  # ZAYA_BASE: this binary over the base one
W = max(13, *(len(k) for k in labels))
print(f"tokens/s and x roofline (best of {runs}); -fa: MXFP4 / FP8 with float32 activations")
print(f"{'batch':>5} {'ctx':>5} " + " ".join(f"{k:>{W}} {'x roof':>6}" for k in labels))
for i, p in enumerate(res[labels[0]][0]["decode"]):
    b = {k: best(k, i) for k in labels}
    print(f"{p['batch']:>5} {p['context']:>5} " +
          " ".join(f"{b[k]['tokens_per_second']:>{W}.1f} {b[k]['ratio_to_roofline']:>6.2f}" for k in labels))
print("ratios of tokens/s: " + ", ".join(f"{a}/{b}" for a, b in ratios))
for i, p in enumerate(res[labels[0]][0]["decode"]):
    b = {k: best(k, i)["tokens_per_second"] for k in labels}
    print(f"{p['batch']:>5} {p['context']:>5} " + " ".join(f"{b[x] / b[y]:>6.2f}x" for x, y in ratios))
print("the same ratios of bytes read per step (what a bandwidth-bound decode can reach at most)")
for i, p in enumerate(res[labels[0]][0]["decode"]):
    by = {k: res[k][0]["decode"][i]["bytes_per_step"] for k in labels}
    print(f"{p['batch']:>5} {p['context']:>5} " + " ".join(f"{by[y] / by[x]:>6.2f}x" for x, y in ratios))
for k in labels:
    w = res[k][0]["weight_bytes"]
    print(f"{k:>{W}} weights {res[k][0]['weights_dtype']}: dense {w['dense'] / 1e6:.2f} MB (attention "
          f"{w.get('attention', 0) / 1e6:.2f}, router {w.get('router', 0) / 1e6:.2f}), per expert "
          f"{w['per_expert'] / 1e6:.3f} MB, LM head {w['lm_head'] / 1e6:.2f} MB")
# Issue 40's batch-1 targets for 4-bit weights: >= 1.5x int8 and >= 2.5x bf16 tokens/s.
for sfx in ("", ".base"):
  for k in [x for x in ("mxfp4-all", "mxfp4-all-q8head", "int8-mxfp4")
            if x + sfx in labels and {"int8" + sfx, "bf16" + sfx} <= set(labels)]:
    for i, p in enumerate(res[labels[0]][0]["decode"]):
        if p["batch"] != 1:
            continue
        t = {x: best(x + sfx, i)["tokens_per_second"] for x in (k, "int8", "bf16")}
        a, b = t[k] / t["int8"], t[k] / t["bf16"]
        print(f"target{sfx}, batch 1, context {p['context']}: {k} {a:.2f}x int8 (>= 1.5: {'yes' if a >= 1.5 else 'NO'}), "
              f"{b:.2f}x bf16 (>= 2.5: {'yes' if b >= 2.5 else 'NO'})")
PY
((steps > 0)) || exit 0
[[ " ${labels[*]} " == *" bf16 "* ]] || exit 0  # perplexities are read against bf16's

echo "== perplexity on held-out text, tiny model trained $steps steps"
data=$dir/data
# shellcheck source=bench/train_tiny.bash
source bench/train_tiny.bash
train_tiny "$dir" "$steps" 128 200000
for c in "${configs[@]}"; do
  IFS=: read -r label dt act <<<"$c"
  fp8_act=bf16
  [[ $act == float ]] && fp8_act=float
  ZAYA_MXFP4_ACTIVATIONS=${act:-int8} ZAYA_FP8_ACTIVATIONS=$fp8_act "$zaya" eval --model "$dir/run/final" --text "$data/heldout.txt" \
    --context 256 --dtype "$dt" --json "$dir/ppl_$label.json" >/dev/null
done
python3 - "$dir" "${labels[@]}" <<'PY'
import json, sys
d, labels = sys.argv[1], sys.argv[2:]
ppl = {k: json.load(open(f"{d}/ppl_{k}.json"))["perplexity"][0]["perplexity"] for k in labels}
W = max(13, *(len(k) for k in labels))
for k, p in ppl.items():
    print(f"{k:>{W}}: perplexity {p:.4f} ({100 * (p / ppl['bf16'] - 1):+.2f}% vs bf16)")
ok_mx = all(abs(ppl[k] / ppl["bf16"] - 1) <= 0.02 for k in labels if "mxfp4" in k)
ok_fp8 = all(abs(ppl[k] / ppl["bf16"] - 1) <= 0.005 for k in labels if k.startswith("fp8"))
print("mxfp4 (every activation path, mxfp4-all too) within 2% of bf16:", "yes" if ok_mx else "NO")
print("fp8 (both activation paths) within 0.5% of bf16:", "yes" if ok_fp8 else "NO")
sys.exit(0 if ok_mx and ok_fp8 else 1)
PY
