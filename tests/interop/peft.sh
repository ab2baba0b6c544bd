#!/usr/bin/env bash
# LoRA adapters between zaya.cpp and the real PEFT (from the pinned PyPI
# environment, scripts/python-env.sh), both ways, over transformers' native
# ZAYA (peft_check.py): a zaya-trained adapter applied by
# PeftModel.from_pretrained, a PEFT-made adapter applied by zaya score,
# generate and serve --lora, merge_and_unload against zaya ckpt export --lora,
# and the adapter_config.json options zaya refuses by name. The versions
# checked are printed first; docs/formats.md lists them.
#   bash tests/interop/peft.sh ZAYA_BINARY SOURCE_DIR
source "$(dirname "$0")/../e2e/common.bash" "$@"
PY=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
cd "$SRC/tests/interop"
prepare_data 512
"$PY" peft_check.py "$ZAYA" "$WORK" "$WORK/data"
echo "interop.peft: all checks passed"
