# Shared helpers for the end-to-end tests (sourced, not run).
# Usage in a test: source "$(dirname "$0")/common.bash" "$@"
set -euo pipefail
ZAYA=${1:?usage: test.sh ZAYA_BINARY SOURCE_DIR}
SRC=${2:?usage: test.sh ZAYA_BINARY SOURCE_DIR}
WORK=$(mktemp -d /tmp/zaya-e2e.XXXXXX)
[[ -n ${ZAYA_KEEP_WORK:-} ]] || trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

fail() { echo "FAIL: $*" >&2; exit 1; }

# mpirun for tests: oversubscribed loopback ranks, allowed as root (CI), shared memory without CMA.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)

# The "loss" values of a metrics.jsonl, one per line.
losses() { grep -o '"loss":[0-9.e+-]*' "$1" | sed 's/"loss"://'; }

# expect_error CODE PATTERN -- command...: the command must exit with CODE and
# print PATTERN (an extended regex) on stderr.
expect_error() {
  local code=$1 pattern=$2; shift 3
  local out rc=0
  out=$("$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc == "$code" ]] || fail "expected exit $code, got $rc from: $* ; stderr: $out"
  grep -Eq -- "$pattern" <<<"$out" || fail "stderr of '$*' lacks /$pattern/: $out"
  echo "ok: $* -> exit $rc: $(head -c 200 <<<"$out")"
}

# Tokenizer + shards of the bundled corpus, once per test, into $WORK/data.
prepare_data() {
  mkdir -p "$WORK/data"
  "$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --vocab-size ${1:-1024} --out "$WORK/data/tokenizer" >/dev/null
  "$ZAYA" data shards --corpus "$SRC/data/kjv/kjv.txt" --tokenizer "$WORK/data/tokenizer.model" --out "$WORK/data" >/dev/null
}

# A small training config over $WORK/data.
write_config() {
  local steps=${2:-30}
  local warmup=$((steps < 10 ? 1 : 5))
  cat >"$WORK/$1" <<TOML
[model]
preset = "tiny"
num_blocks = 2
[data]
dir = "$WORK/data"
tokenizer = "$WORK/data/tokenizer.model"
[train]
micro_batch = 8
seq_len = 64
steps = $steps
eval_every = 10
eval_batches = 2
log_every = 5
out_dir = "$WORK/run"
[schedule]
warmup_steps = $warmup
TOML
}

# The fault-tolerance tests' job: 12 steps of 4 sequences, a checkpoint every 3 steps.
write_ft_config() {
  prepare_data 512
  write_config "$1" 12
  sed -i 's/^micro_batch = 8/micro_batch = 4/' "$WORK/$1"
  printf '[checkpoint]\nevery = 3\n' >>"$WORK/$1"
}

# expect_same_training REF RUN IDS_JSON STEPS: the run in $WORK/RUN logged the
# same first-step gradient norm as $WORK/REF (same weights, same batch: within
# 1e-4 relative), STEPS losses within 1e-3 nats of REF's, the same last
# validation loss, and its final weights score IDS_JSON within 1e-3 of REF's
# (float32 sums in another order: layouts agree closely, not bitwise).
expect_same_training() {
  local ref=$1 run=$2 ids=$3 steps=$4
  local g1 g2
  g1=$(grep -o '"grad_norm":[0-9.e+-]*' "$WORK/$ref/metrics.jsonl" | head -1 | cut -d: -f2)
  g2=$(grep -o '"grad_norm":[0-9.e+-]*' "$WORK/$run/metrics.jsonl" | head -1 | cut -d: -f2)
  awk -v a="$g1" -v b="$g2" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; exit !(a > 0 && d < 1e-4) }' ||
    fail "$run: first-step gradient norm $g2, $ref's $g1"
  paste <(losses "$WORK/$ref/metrics.jsonl") <(losses "$WORK/$run/metrics.jsonl") |
    awk -v L="$run" -v N="$steps" '{ d = $1 - $2; if (d < 0) d = -d; if (d > max) max = d }
      END { printf "%s: largest loss difference over %d steps %.2e\n", L, NR, max; exit !(NR == N && max < 1e-3) }' ||
    fail "$run: losses differ from $ref by 1e-3 or more (or not $steps steps)"
  local v1 v2 s1 s2
  v1=$(grep -o '"val_loss":[0-9.]*' "$WORK/$ref/metrics.jsonl" | tail -1 | cut -d: -f2)
  v2=$(grep -o '"val_loss":[0-9.]*' "$WORK/$run/metrics.jsonl" | tail -1 | cut -d: -f2)
  awk -v a="$v1" -v b="$v2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3) }' ||
    fail "$run: validation loss $v2 vs $v1"
  for r in "$ref" "$run"; do
    [[ -f $WORK/$r.score ]] || "$ZAYA" score --model "$WORK/$r/final" --tokens "$ids" --json "$WORK/$r.score" >/dev/null
  done
  s1=$(grep -o '"mean_loss": *[0-9.]*' "$WORK/$ref.score" | grep -o '[0-9.]*$')
  s2=$(grep -o '"mean_loss": *[0-9.]*' "$WORK/$run.score" | grep -o '[0-9.]*$')
  awk -v a="$s1" -v b="$s2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3) }' ||
    fail "$run: final weights score $s2, $ref's $s1"
}

# start_serve KEY MODEL [FLAGS...]: zaya serve on a free loopback port with API
# key KEY (its stderr in $WORK/serve.log), stopped when the test exits; sets
# SERVER (its pid) and URL (http://127.0.0.1:PORT) once it listens.
start_serve() {
  local key=$1 model=$2; shift 2
  ZAYA_API_KEY=$key "$ZAYA" serve --model "$model" --port 0 "$@" 2>"$WORK/serve.log" &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; [[ -n ${ZAYA_KEEP_WORK:-} ]] || rm -rf "$WORK"' EXIT
  for _ in $(seq 100); do
    grep -q "on http://" "$WORK/serve.log" && break
    kill -0 $SERVER 2>/dev/null || fail "zaya serve exited: $(cat "$WORK/serve.log")"
    sleep 0.2
  done
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/serve.log" | head -1)
  [[ -n $URL ]] || fail "zaya serve did not say its port: $(cat "$WORK/serve.log")"
}

# The small RL set-up of the resume and multi-rank tests: a 512-piece
# tokenizer, tools/rl_task.py's two-word prompts, and $WORK/len_reward.py, a
# reward program that varies with the completion's length (from a fresh model
# every group then has advantages, so every step updates the weights).
prepare_rl_task() {
  "$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --vocab-size 512 --max-sentences 5000 \
    --out "$WORK/tok" >/dev/null
  python3 "$SRC/tools/rl_task.py" make "$WORK" --words 2 --vocab 8 --sft 10 --prompts 20 --eval 6
  # configs/rl-tiny.toml over the task, from a fresh model, scored by len_reward.py (below).
  RL_TASK=(--config "$SRC/configs/rl-tiny.toml" --quiet --set model.init_from='""'
    --set data.tokenizer="\"$WORK/tok.model\"" --set rl.prompts="\"$WORK/prompts.jsonl\""
    --set rl.command="\"python3 $WORK/len_reward.py\"")
  cat >"$WORK/len_reward.py" <<'PY'
import json, sys
for line in sys.stdin:
    print(len(json.loads(line)["completion"]) % 7 / 6)
PY
}
