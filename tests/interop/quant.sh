#!/usr/bin/env bash
# zaya.cpp loads the quantized-expert checkpoints that PyPI's compressed-tensors
# writes (MXFP4 and FP8, docs/formats.md "Quantized experts"), checked against
# transformers' forward over the library's own dequantization (quant_check.py).
#   bash tests/interop/quant.sh ZAYA_BINARY SOURCE_DIR
source "$(dirname "$0")/../e2e/common.bash" "$@"
PY=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
cd "$SRC/tests/interop"
mkdir -p "$WORK/data"
"$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --vocab-size 512 --out "$WORK/data/tokenizer" >/dev/null
"$PY" quant_check.py "$ZAYA" "$WORK" "$WORK/data/tokenizer.model"
echo "interop.quant: all checks passed"
