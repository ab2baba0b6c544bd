# shellcheck shell=bash
# Sourced by bench scripts: train_tiny DIR STEPS SEQ_LEN [HELDOUT_BYTES] trains
# the `tiny` preset on the bundled corpus (data/kjv, a 1024-piece tokenizer)
# into DIR/run and leaves DIR/run/final; $zaya is the binary. With
# HELDOUT_BYTES > 0 the corpus's last HELDOUT_BYTES bytes are kept out of
# training and written (from their first blank line) to DIR/data/heldout.txt,
# and the schedule warms up over 20 steps (the perplexity tables' recipe).
# train_preset DIR PRESET STEPS SEQ_LEN [HELDOUT_BYTES] [DATA_DIR] does the
# same for any preset; with DATA_DIR it trains on that directory's tokenizer
# and shards (a draft model and its target share one tokenizer) instead of
# making its own. INIT_FROM (a 7th argument) starts the run from that model's
# weights (`model.init_from`; the preset must describe the same model).
# MICRO_BATCH (an 8th argument, default 8): sequences per step (a longer
# SEQ_LEN with fewer sequences keeps the tokens per step).
# TRAIN_CORPUS: the text file a run without DATA_DIR makes its tokenizer and
# shards from (default data/kjv/kjv.txt, the bundled corpus).
# TRAIN_THREADS: the runs' `train.threads` (default 0: all cores; 1 on a
# machine loaded by other work, where waiting for a descheduled thread costs more).
train_tiny() {
  train_preset "$1" tiny "$2" "$3" "${4:-0}"
}

train_preset() {
  local dir=$1 preset=$2 steps=$3 seq_len=$4 heldout=${5:-0} data=${6:-} init=${7:-} corpus=${TRAIN_CORPUS:-data/kjv/kjv.txt} schedule=""
  local micro_batch=${8:-8} init_line=""
  [[ -z $init ]] || init_line="init_from = \"$init\""
  if ((heldout > 0)); then
    schedule=$'[schedule]\nwarmup_steps = 20'
  fi
  if [[ -z $data ]]; then
    data=$dir/data
    mkdir -p "$data"
    if ((heldout > 0)); then
      local total
      total=$(wc -c <"$corpus")
      head -c $((total - heldout)) "$corpus" >"$data/train.txt"
      tail -c "$heldout" "$corpus" | sed -n '/^$/,$p' >"$data/heldout.txt"
      corpus=$data/train.txt
    fi
    "$zaya" data tokenizer --corpus "$corpus" --vocab-size 1024 --out "$data/tokenizer" >/dev/null
    "$zaya" data shards --corpus "$corpus" --tokenizer "$data/tokenizer.model" --out "$data" >/dev/null
  fi
  mkdir -p "$dir"
  cat >"$dir/train.toml" <<TOML
[model]
preset = "$preset"
$init_line
[data]
dir = "$data"
tokenizer = "$data/tokenizer.model"
[train]
micro_batch = $micro_batch
seq_len = $seq_len
steps = $steps
eval_every = 0
threads = ${TRAIN_THREADS:-0}
out_dir = "$dir/run"
$schedule
TOML
  rm -rf "$dir/run"
  "$zaya" train --config "$dir/train.toml" --quiet >/dev/null
}
