# shellcheck shell=bash
# Sourced by bench scripts: train_tiny DIR STEPS SEQ_LEN [HELDOUT_BYTES] trains
# the `tiny` preset on the bundled corpus (data/kjv, a 1024-piece tokenizer)
# into DIR/run and leaves DIR/run/final; $zaya is the binary. With
# HELDOUT_BYTES > 0 the corpus's last HELDOUT_BYTES bytes are kept out of
# training and written (from their first blank line) to DIR/data/heldout.txt,
# and the schedule warms up over 20 steps (the perplexity tables' recipe).
train_tiny() {
  local dir=$1 steps=$2 seq_len=$3 heldout=${4:-0} corpus=data/kjv/kjv.txt schedule=""
  mkdir -p "$dir/data"
  if ((heldout > 0)); then
    local total
    total=$(wc -c <"$corpus")
    head -c $((total - heldout)) "$corpus" >"$dir/data/train.txt"
    tail -c "$heldout" "$corpus" | sed -n '/^$/,$p' >"$dir/data/heldout.txt"
    corpus=$dir/data/train.txt
    schedule=$'[schedule]\nwarmup_steps = 20'
  fi
  "$zaya" data tokenizer --corpus "$corpus" --vocab-size 1024 --out "$dir/data/tokenizer" >/dev/null
  "$zaya" data shards --corpus "$corpus" --tokenizer "$dir/data/tokenizer.model" --out "$dir/data" >/dev/null
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
$schedule
TOML
  rm -rf "$dir/run"
  "$zaya" train --config "$dir/train.toml" --quiet >/dev/null
}
