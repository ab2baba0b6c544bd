#!/usr/bin/env bash
# Several LoRA adapters in one decode batch (docs/serve.md "Adapters"): decode
# tokens/s of a batch whose sequences use 4 different adapters (sequence s on
# adapter s % 4) against the same batch on one adapter, and against no adapter
# for scale, with `zaya bench infer --lora-adapters N` (random adapters on
# every target, applied unmerged: the base product once over the batch, each
# adapter's low-rank products over its rows). The three runs alternate round
# by round so that they see the same machine (shared and noisy: only the
# ratios mean something); best and median of RUNS each. Target: mixed / one
# adapter >= 0.8.
#
#   bench/lora_mix.sh [ZAYA] [RUNS] [-- extra bench infer flags]
#   e.g. bench/lora_mix.sh build/zaya 5 -- --preset small --batch 8 --context 256 --lora-rank 16 --threads 2
set -euo pipefail
zaya=${1:-build/zaya} runs=${2:-5}
shift $(( $# >= 2 ? 2 : $# ))
[[ ${1:-} == -- ]] && shift
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(--preset small --batch 8 --context 256 --decode-steps 16 --lora-rank 16)
[[ -x $zaya ]] || { echo "lora_mix.sh: $zaya is not an executable" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$runs"); do
  for n in 0 1 4; do
    "$zaya" bench infer --no-prefill --no-working-set "${flags[@]}" --lora-adapters "$n" --json "$tmp/$n-$i.json" \
      >/dev/null
  done
done
python3 - "$tmp" "$runs" <<'PY'
import json, statistics, sys
tmp, runs = sys.argv[1], int(sys.argv[2])
first = json.load(open(f"{tmp}/0-1.json"))
print(f"LoRA adapters in one decode batch: {first['model']}, {first['threads']} threads, {runs} interleaved rounds "
      f"(best / median tokens/s)")
for k, p in enumerate(first["decode"]):
    tps = {n: [json.load(open(f"{tmp}/{n}-{i}.json"))["decode"][k]["tokens_per_second"] for i in range(1, runs + 1)]
           for n in (0, 1, 4)}
    best = {n: max(v) for n, v in tps.items()}
    med = {n: statistics.median(v) for n, v in tps.items()}
    print(f"  batch {p['batch']} context {p['context']}: no adapter {best[0]:.1f} / {med[0]:.1f}, "
          f"1 adapter {best[1]:.1f} / {med[1]:.1f}, 4 adapters mixed {best[4]:.1f} / {med[4]:.1f}")
    print(f"    mixed / one adapter: best {best[4] / best[1]:.3f}, median {med[4] / med[1]:.3f} (target >= 0.8); "
          f"one adapter / none: best {best[1] / best[0]:.3f}")
PY
