#!/usr/bin/env bash
# int8 weights for decode, side by side in one run on this machine:
#  1. `zaya bench infer` decode tokens/s at batch 1 and 8 (context 512) with
#     f32, bf16 and int8 weights (int8: per-output-channel for attention and
#     experts; router, convolutions and embedding as bf16) on PRESET's random
#     weights (default small);
#  2. perplexity of held-out text (the last 200 KB of the KJV corpus, which
#     the model below never trained on) with each dtype, on a tiny model
#     trained here for STEPS steps on the first part of the corpus.
#   [THREADS=1] bench/int8_decode.sh [PRESET] [STEPS] [DIR]   (one thread by default: on shared
#   cores OpenMP regions wait for descheduled workers, docs/inference.md)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-small} steps=${2:-200} dir=${3:-runs/bench/int8}
zaya=${ZAYA:-build/zaya}
mkdir -p "$dir"
for dt in f32 bf16 int8; do
  echo "== decode, $preset preset, $dt weights"
  "$zaya" bench infer --preset "$preset" --dtype "$dt" --threads "${THREADS:-1}" --no-prefill --no-working-set --batch 1,8 --context 512 \
    --decode-steps 64 --warmup 8 --json "$dir/decode_$dt.json" >/dev/null
done
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
res = {dt: json.load(open(f"{d}/decode_{dt}.json")) for dt in ("f32", "bf16", "int8")}
print(f"{'batch':>5} {'f32 tok/s':>10} {'bf16 tok/s':>10} {'int8 tok/s':>10} {'int8/bf16':>9} {'int8/f32':>8}")
for i, p in enumerate(res["int8"]["decode"]):
    f, b, q = (res[dt]["decode"][i]["tokens_per_second"] for dt in ("f32", "bf16", "int8"))
    print(f"{p['batch']:>5} {f:>10.1f} {b:>10.1f} {q:>10.1f} {q / b:>8.2f}x {q / f:>7.2f}x")
for dt in ("f32", "bf16", "int8"):
    w = res[dt]["weight_bytes"]
    print(f"{dt:>5} weights {res[dt]['weights_dtype']}: dense {w['dense'] / 1e6:.1f} MB, per expert {w['per_expert'] / 1e6:.2f} MB")
PY

echo "== perplexity on held-out text, tiny model trained $steps steps"
data=$dir/data
mkdir -p "$data"
total=$(wc -c <data/kjv/kjv.txt)
head -c $((total - 200000)) data/kjv/kjv.txt >"$data/train.txt"
tail -c 200000 data/kjv/kjv.txt | sed -n '/^$/,$p' >"$data/heldout.txt"
"$zaya" data tokenizer --corpus "$data/train.txt" --vocab-size 1024 --out "$data/tokenizer" >/dev/null
"$zaya" data shards --corpus "$data/train.txt" --tokenizer "$data/tokenizer.model" --out "$data" >/dev/null
cat >"$dir/train.toml" <<TOML
[model]
preset = "tiny"
[data]
dir = "$data"
tokenizer = "$data/tokenizer.model"
[train]
micro_batch = 8
seq_len = 128
steps = $steps
eval_every = 0
log_every = 50
out_dir = "$dir/run"
[schedule]
warmup_steps = 20
TOML
rm -rf "$dir/run"
"$zaya" train --config "$dir/train.toml" --quiet >/dev/null
for dt in f32 bf16 int8; do
  "$zaya" eval --model "$dir/run/final" --text "$data/heldout.txt" --context 256 --dtype "$dt" --json "$dir/ppl_$dt.json" >/dev/null
done
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
ppl = {dt: json.load(open(f"{d}/ppl_{dt}.json"))["perplexity"][0]["perplexity"] for dt in ("f32", "bf16", "int8")}
for dt, p in ppl.items():
    print(f"{dt:>5}: perplexity {p:.4f} ({100 * (p / ppl['bf16'] - 1):+.2f}% vs bf16)")
ok = abs(ppl["int8"] / ppl["bf16"] - 1) <= 0.01
print("int8 within 1% of bf16:", "yes" if ok else "NO")
sys.exit(0 if ok else 1)
PY
