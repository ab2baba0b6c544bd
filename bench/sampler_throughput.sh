#!/usr/bin/env bash
# The training sampler's read throughput against the planner's step time
# (docs/performance.md, "Data pipeline"): one data-parallel rank of ZAYA1-base's
# run (1,024 ranks, global batch 4,096 x 4,096 tokens, so 4 sequences per rank
# per step) drawing shuffled windows, with document starts, from a Megatron
# uint16 dataset of random ids.
# Usage: bench/sampler_throughput.sh [ZAYA=build/zaya] [TOKENS_MILLIONS=256]
set -euo pipefail
ZAYA=${1:-build/zaya}
MTOK=${2:-256}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# PREFIX.bin: random uint16 ids; PREFIX.idx: sequences of 2,048 tokens, one per document.
head -c $((MTOK * 2 * 1000000)) /dev/urandom >"$WORK/ds.bin"
python3 - "$WORK/ds" "$MTOK" <<'PY'
import struct, sys
n = int(sys.argv[2]) * 1000000
lens = [2048] * (n // 2048) + ([n % 2048] if n % 2048 else [])
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lens), len(lens) + 1))
    f.write(struct.pack(f"<{len(lens)}i", *lens))
    f.write(struct.pack(f"<{len(lens)}q", *[2 * 2048 * i for i in range(len(lens))]))
    f.write(struct.pack(f"<{len(lens) + 1}q", *range(len(lens) + 1)))
PY

plan=$("$ZAYA" plan --model zaya1-base --world 1024 --global-batch 4096 | grep -E '^  step ')
step=$(awk '{print $2}' <<<"$plan")
echo "planner (zaya1-base, mi300x-pollara, 1024 ranks, global batch 4096 x 4096):$plan"
for batch in 4 64; do
  out=$("$ZAYA" data read-speed --data "$WORK/ds" --vocab 65536 --seq 4096 --batch $batch --ranks 1024 --seconds 3)
  echo "$out"
  per=$(grep -oE '[0-9.e+-]+ s/step' <<<"$out" | awk '{print $1}')
  awk -v s="$step" -v p="$per" -v b=$batch 'BEGIN { printf "  batch %d: %.0fx faster than the step (%s s)\n", b, s / p, s }'
done
