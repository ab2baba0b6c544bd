#!/usr/bin/env bash
# int8 weights for decode, side by side in one run on this machine:
#  1. `zaya bench infer` decode tokens/s at batch 1 and 8 (context 512) with
#     f32, bf16 and int8 weights (int8: the attention projections, experts and
#     LM head in Q8_0 blocks; router and convolutions bf16) on PRESET's random
#     weights (default small), RUNS rounds (default 3) interleaved (f32, bf16,
#     int8, f32, ...) so that a change of load hits every dtype alike, the best
#     round of each reported;
#  2. perplexity of held-out text (the last 200 KB of the KJV corpus, which
#     the model below never trained on) with each dtype, on a tiny model
#     trained here for STEPS steps on the first part of the corpus, and of its
#     `zaya ckpt export --dtype q8_0` GGUF file (the same int8 bytes: equal to
#     int8's).
#   [THREADS=1] [RUNS=3] bench/int8_decode.sh [PRESET] [STEPS] [DIR]   (one thread by default: on shared
#   cores OpenMP regions wait for descheduled workers, docs/inference.md)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-small} steps=${2:-200} dir=${3:-runs/bench/int8}
zaya=${ZAYA:-build/zaya}
runs=${RUNS:-3}
mkdir -p "$dir"
echo "== decode, $preset preset, $runs interleaved rounds of f32, bf16, int8 (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq 1 "$runs"); do
  for dt in f32 bf16 int8; do
    "$zaya" bench infer --preset "$preset" --dtype "$dt" --threads "${THREADS:-1}" --no-prefill --no-working-set --batch 1,8 --context 512 \
      --decode-steps 64 --warmup 8 --json "$dir/decode_${dt}_$r.json" >/dev/null
  done
done
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir" "$runs" <<'PY'
import json, sys
d, runs = sys.argv[1], int(sys.argv[2])
dts = ("f32", "bf16", "int8")
res = {dt: [json.load(open(f"{d}/decode_{dt}_{r}.json")) for r in range(1, runs + 1)] for dt in dts}
def rates(dt, i):
    return [x["decode"][i]["tokens_per_second"] for x in res[dt]]
print(f"{'batch':>5} {'f32 tok/s':>10} {'bf16 tok/s':>10} {'int8 tok/s':>10} {'int8/bf16':>9} {'int8/f32':>8}   (best of {runs}; int8/bf16 per round)")
for i, p in enumerate(res["int8"][0]["decode"]):
    f, b, q = (max(rates(dt, i)) for dt in dts)
    per_round = " ".join(f"{x / y:.2f}" for x, y in zip(rates("int8", i), rates("bf16", i)))
    print(f"{p['batch']:>5} {f:>10.1f} {b:>10.1f} {q:>10.1f} {q / b:>8.2f}x {q / f:>7.2f}x   {per_round}")
for dt in dts:
    w = res[dt][0]["weight_bytes"]
    print(f"{dt:>5} weights {res[dt][0]['weights_dtype']}: dense {w['dense'] / 1e6:.1f} MB, per expert {w['per_expert'] / 1e6:.2f} MB, LM head {w['lm_head'] / 1e6:.2f} MB")
PY

echo "== perplexity on held-out text, tiny model trained $steps steps"
data=$dir/data
# shellcheck source=bench/train_tiny.bash
source bench/train_tiny.bash
train_tiny "$dir" "$steps" 128 200000
for dt in f32 bf16 int8; do
  "$zaya" eval --model "$dir/run/final" --text "$data/heldout.txt" --context 256 --dtype "$dt" --json "$dir/ppl_$dt.json" >/dev/null
done
"$zaya" ckpt export --in "$dir/run/final" --out "$dir/q8.gguf" --dtype q8_0 --force >/dev/null
"$zaya" eval --model "$dir/q8.gguf" --text "$data/heldout.txt" --context 256 --json "$dir/ppl_q8_0.json" >/dev/null
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
ppl = {dt: json.load(open(f"{d}/ppl_{dt}.json"))["perplexity"][0]["perplexity"] for dt in ("f32", "bf16", "int8", "q8_0")}
for dt, p in ppl.items():
    print(f"{dt:>5}: perplexity {p:.4f} ({100 * (p / ppl['bf16'] - 1):+.2f}% vs bf16)")
ok = abs(ppl["int8"] / ppl["bf16"] - 1) <= 0.01
print("int8 within 1% of bf16:", "yes" if ok else "NO")
same = ppl["q8_0"] == ppl["int8"]
print("the q8_0 GGUF equals --dtype int8:", "yes" if same else "NO")
ok = ok and same
sys.exit(0 if ok else 1)
PY
