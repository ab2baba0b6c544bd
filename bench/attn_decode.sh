#!/usr/bin/env bash
# The per-row decode attention alone (bench/attn_decode.cc), a revision's
# cached_attention.cc against the working tree's, in interleaved rounds:
# best thread-CPU ms per 8-layer step (small's shape, context 1,024) for a
# bf16 cache alone, with 1.1 MB of weights read before each layer (pages in
# order and shuffled), and an f32 cache; new/base ratios, and each binary's
# output hash (a bf16 cache and the f32 cache of its values hash alike within
# one binary; base and new differ where the numerics changed). Needs build/ (its
# libzaya_ops.a and libzaya_core.a).
#   [ROUNDS=4] bench/attn_decode.sh [BASE_REV (default main)] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-main} dir=${2:-runs/bench/attn_decode} rounds=${ROUNDS:-4}
mkdir -p "$dir"
dir=$(realpath "$dir")
git show "$rev:src/zaya/infer/cached_attention.cc" > "$dir/base_cached_attention.cc"
build() {
  g++ -O3 -DNDEBUG -march=native -fno-math-errno -fopenmp -std=c++20 -I"$PWD/src" -DATTN_CC="\"$1\"" \
    bench/attn_decode.cc -o "$2" build/libzaya_ops.a build/libzaya_core.a -ldnnl -lfmt -lpthread
}
build "$dir/base_cached_attention.cc" "$dir/attn_base"
build "$PWD/src/zaya/infer/cached_attention.cc" "$dir/attn_new"
echo "== per-row decode attention, $rev vs the tree, $rounds rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for args in "1024 20 1 1 0 0:bf16 cache" "1024 20 1 1 1.1 0:bf16 + weights" "1024 20 1 1 1.1 1:bf16 + weights, shuffled" \
  "1024 20 0 1 0 0:f32 cache"; do
  read -ra a <<< "${args%%:*}"
  label=${args#*:}
  for ((r = 0; r < rounds; r++)); do
    echo "base $("$dir/attn_base" "${a[@]}")"
    echo "new $("$dir/attn_new" "${a[@]}")"
  done | awk -v label="$label" '{ if (!($1 in m) || $3 < m[$1]) m[$1] = $3; h[$1] = $NF }
    END { printf "%-26s base %.4f ms  new %.4f ms  new/base %.3f  (output hashes %s %s)\n", label, m["base"],
          m["new"], m["new"] / m["base"], h["base"], h["new"] }'
done
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
