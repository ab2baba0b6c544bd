#!/usr/bin/env bash
# zaya.cpp against the libraries its users hold, from the pinned PyPI
# environment (scripts/python-env.sh): transformers' native ZAYA both ways
# (hf_to_zaya.py, zaya_to_hf.py) and llama.cpp's gguf reader (gguf_check.py).
# The versions checked are printed first; docs/formats.md lists them.
#   bash tests/interop/hf.sh ZAYA_BINARY SOURCE_DIR
source "$(dirname "$0")/../e2e/common.bash" "$@"
PY=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
cd "$SRC/tests/interop"

# The kjv tokenizer and shards, and a small shard of 10 short documents (one
# training batch is its whole epoch: zaya_to_hf.py's first-step loss).
prepare_data 512
mkdir -p "$WORK/small" "$WORK/hf_to_zaya" "$WORK/zaya_to_hf" "$WORK/gguf"
cp "$WORK/data/tokenizer.model" "$WORK/small/"
awk 'NF && ++n <= 44 { print; if (n % 4 == 0) print "" }' "$SRC/data/kjv/kjv.txt" >"$WORK/small.txt"
"$ZAYA" data shards --corpus "$WORK/small.txt" --tokenizer "$WORK/small/tokenizer.model" --out "$WORK/small" \
  --val-fraction 0.1 --quiet >/dev/null

"$PY" hf_to_zaya.py "$ZAYA" "$WORK/hf_to_zaya" "$WORK/data/tokenizer.model"
"$PY" zaya_to_hf.py "$ZAYA" "$SRC" "$WORK/zaya_to_hf" "$WORK/data" "$WORK/small"
# Every GGUF dtype of a transformers-made model (hf_to_zaya's) and of a zaya-trained one with sliding blocks.
"$PY" gguf_check.py "$ZAYA" "$WORK/gguf" "$WORK/hf_to_zaya/8b-float32" "$WORK/zaya_to_hf/native-tiny-sliding/final"
echo "interop.hf: all checks passed"
