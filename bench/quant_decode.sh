#!/usr/bin/env bash
# Quantized experts for decode (docs/inference.md, "Quantized experts"), side by
# side in one run on this machine:
#  1. `zaya bench infer` decode tokens/s and x DRAM roofline at batch 1 and 8,
#     contexts CONTEXTS (default 128,1024), with bf16, int8 (attention, experts
#     and LM head Q8_0), mxfp4 and fp8 (the routed experts only, packed in
#     memory; the rest bf16) and int8-mxfp4 (int8's Q8_0 attention and LM head
#     beside MXFP4 experts) weights on PRESET's random weights (default small),
#     RUNS rounds (default 3) interleaved so that a change of load hits every
#     dtype alike, the best round of each reported;
#  2. perplexity of held-out text (the last 200 KB of the KJV corpus) with each
#     dtype, on a tiny model trained here for STEPS steps on the rest.
#   [THREADS=1] [RUNS=3] [CONTEXTS=128,1024] bench/quant_decode.sh [PRESET] [STEPS] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-small} steps=${2:-200} dir=${3:-runs/bench/quant}
zaya=${ZAYA:-build/zaya}
runs=${RUNS:-3}
dtypes=(bf16 int8 mxfp4 int8-mxfp4 fp8)
mkdir -p "$dir"
echo "== decode, $preset preset, $runs interleaved rounds of ${dtypes[*]} (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq 1 "$runs"); do
  for dt in "${dtypes[@]}"; do
    "$zaya" bench infer --preset "$preset" --dtype "$dt" --threads "${THREADS:-1}" --no-prefill --no-working-set \
      --batch 1,8 --context "${CONTEXTS:-128,1024}" --decode-steps 32 --warmup 4 --json "$dir/decode_${dt}_$r.json" >/dev/null
  done
done
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir" "$runs" "${dtypes[@]}" <<'PY'
import json, sys
d, runs, dts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = {dt: [json.load(open(f"{d}/decode_{dt}_{r}.json")) for r in range(1, runs + 1)] for dt in dts}
def best(dt, i):
    return max(res[dt], key=lambda x: x["decode"][i]["tokens_per_second"])["decode"][i]
print(f"{'batch':>5} {'ctx':>5} " + " ".join(f"{dt:>10} {'x roof':>6}" for dt in dts) +
      f" {'i8mx/int8':>10} {'i8mx/bf16':>10}   (best of {runs}; i8mx = int8-mxfp4)")
for i, p in enumerate(res["bf16"][0]["decode"]):
    b = {dt: best(dt, i) for dt in dts}
    row = " ".join(f"{b[dt]['tokens_per_second']:>10.1f} {b[dt]['ratio_to_roofline']:>6.2f}" for dt in dts)
    mx = b["int8-mxfp4"]["tokens_per_second"]
    print(f"{p['batch']:>5} {p['context']:>5} {row} {mx / b['int8']['tokens_per_second']:>9.2f}x"
          f" {mx / b['bf16']['tokens_per_second']:>9.2f}x")
for dt in dts:
    w = res[dt][0]["weight_bytes"]
    print(f"{dt:>5} weights {res[dt][0]['weights_dtype']}: dense {w['dense'] / 1e6:.2f} MB, per expert "
          f"{w['per_expert'] / 1e6:.3f} MB, LM head {w['lm_head'] / 1e6:.2f} MB")
PY

echo "== perplexity on held-out text, tiny model trained $steps steps"
data=$dir/data
# shellcheck source=bench/train_tiny.bash
source bench/train_tiny.bash
train_tiny "$dir" "$steps" 128 200000
for dt in "${dtypes[@]}"; do
  "$zaya" eval --model "$dir/run/final" --text "$data/heldout.txt" --context 256 --dtype "$dt" --json "$dir/ppl_$dt.json" >/dev/null
done
python3 - "$dir" "${dtypes[@]}" <<'PY'
import json, sys
d, dts = sys.argv[1], sys.argv[2:]
ppl = {dt: json.load(open(f"{d}/ppl_{dt}.json"))["perplexity"][0]["perplexity"] for dt in dts}
for dt, p in ppl.items():
    print(f"{dt:>5}: perplexity {p:.4f} ({100 * (p / ppl['bf16'] - 1):+.2f}% vs bf16)")
ok_mx = abs(ppl["mxfp4"] / ppl["bf16"] - 1) <= 0.02
ok_fp8 = abs(ppl["fp8"] / ppl["bf16"] - 1) <= 0.005
print("mxfp4 within 2% of bf16:", "yes" if ok_mx else "NO")
print("fp8 within 0.5% of bf16:", "yes" if ok_fp8 else "NO")
sys.exit(0 if ok_mx and ok_fp8 else 1)
PY
