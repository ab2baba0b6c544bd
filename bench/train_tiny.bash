# shellcheck shell=bash
# Sourced by bench scripts: train_tiny DIR STEPS SEQ_LEN trains the `tiny`
# preset on the bundled corpus (data/kjv, a 1024-piece tokenizer) into DIR/run
# and leaves DIR/run/final; $zaya is the binary.
train_tiny() {
  local dir=$1 steps=$2 seq_len=$3
  mkdir -p "$dir/data"
  "$zaya" data tokenizer --corpus data/kjv/kjv.txt --vocab-size 1024 --out "$dir/data/tokenizer" >/dev/null
  "$zaya" data shards --corpus data/kjv/kjv.txt --tokenizer "$dir/data/tokenizer.model" --out "$dir/data" >/dev/null
  cat >"$dir/train.toml" <<TOML
[model]
preset = "tiny"
[data]
dir = "$dir/data"
tokenizer = "$dir/data/tokenizer.model"
[train]
micro_batch = 8
seq_len = $seq_len
steps = $steps
eval_every = 0
out_dir = "$dir/run"
TOML
  rm -rf "$dir/run"
  "$zaya" train --config "$dir/train.toml" --quiet >/dev/null
}
