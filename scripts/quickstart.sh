#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install dependencies, build,
# prepare the bundled corpus, train the `tiny` preset, generate from it. Steps
# whose outputs exist are skipped, so it can be run again.
#   scripts/quickstart.sh            (everything)
#   SKIP_SETUP=1 scripts/quickstart.sh   (dependencies already installed)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${SKIP_SETUP:-0}" != 1 ]]; then scripts/setup-debian.sh; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target zaya

data=runs/data/kjv
mkdir -p "$data"
if [[ ! -f $data/tokenizer.model ]]; then
  build/zaya data tokenizer --corpus data/kjv/kjv.txt --vocab-size 4096 --out "$data/tokenizer"
fi
if [[ ! -f $data/train.idx ]]; then
  build/zaya data shards --corpus data/kjv/kjv.txt --tokenizer "$data/tokenizer.model" --out "$data"
fi
# A second run reuses the trained model; an interrupted training run continues
# from its newest checkpoint.
if [[ -f runs/tiny/final/model.safetensors ]]; then
  echo "runs/tiny/final exists: reusing the trained model (remove runs/tiny to train again)"
elif compgen -G "runs/tiny/checkpoints/step_*" >/dev/null; then
  build/zaya train --config configs/tiny.toml --resume
else
  build/zaya train --config configs/tiny.toml
fi
build/zaya generate --model runs/tiny/final --prompt "And God said" --max-new-tokens 60 --seed 1
