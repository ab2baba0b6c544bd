#!/usr/bin/env bash
# Tokenization throughput of `zaya data shards` beside SentencePiece's own
# spm_encode, on the same corpus, model and thread counts (docs/performance.md,
# "Data pipeline").
# Usage: bench/tokenize_throughput.sh [ZAYA=build/zaya] [REPEAT=4]
#   The corpus is data/kjv/kjv.txt repeated REPEAT times (4.3 MB each).
#   spm_encode has no thread option: "2 threads" runs two spm_encode processes
#   on the two halves of the corpus at once.
set -euo pipefail
ZAYA=${1:-build/zaya}
REPEAT=${2:-4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for _ in $(seq "$REPEAT"); do cat "$ROOT/data/kjv/kjv.txt"; done > "$WORK/corpus.txt"
BYTES=$(stat -c %s "$WORK/corpus.txt")
"$ZAYA" data tokenizer --corpus "$ROOT/data/kjv/kjv.txt" --out "$WORK/tok" --vocab-size 4096 > /dev/null
split -n l/2 "$WORK/corpus.txt" "$WORK/half."

seconds() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
report() { printf '%-34s %7.2f s  %7.2f MB/s\n' "$1" "$2" "$(echo "$BYTES / $2 / 1000000" | bc -l)"; }

echo "corpus: $BYTES bytes (kjv x $REPEAT), tokenizer: 4096-piece BPE, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
t=$(seconds bash -c "spm_encode --model='$WORK/tok.model' --output_format=id < '$WORK/corpus.txt' > /dev/null")
report "spm_encode, 1 process" "$t"
t=$(seconds bash -c "spm_encode --model='$WORK/tok.model' --output_format=id < '$WORK/half.aa' > /dev/null &
  spm_encode --model='$WORK/tok.model' --output_format=id < '$WORK/half.ab' > /dev/null; wait")
report "spm_encode, 2 processes (halves)" "$t"
for w in 1 2; do
  t=$(seconds bash -c "'$ZAYA' data shards --corpus '$WORK/corpus.txt' --tokenizer '$WORK/tok.model' \
        --out '$WORK/s$w' --workers $w --quiet > /dev/null")
  report "zaya data shards --workers $w" "$t"
done
cmp "$WORK/s1/train.bin" "$WORK/s2/train.bin" && echo "train.bin identical for 1 and 2 workers"
