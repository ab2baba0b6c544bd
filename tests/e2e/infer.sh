#!/usr/bin/env bash
# Inference end to end: the cached decoder gives the same text as the
# full-sequence reference (greedy and sampled), a training checkpoint loads
# like the exported directory, batched JSONL requests equal
# single runs, stop strings, score, eval (perplexity of text and shards,
# multiple choice), bench infer, and bad input with clear errors.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config train.toml 12
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
M=$WORK/run/final

# Cached decoder == full-sequence reference, greedy and seeded sampling.
for args in "--temperature 0" "--temperature 0.9 --top-k 30 --top-p 0.9 --seed 7"; do
  # shellcheck disable=SC2086
  "$ZAYA" generate --model "$M" --prompt "And God said" --max-new-tokens 24 $args >"$WORK/cached.txt"
  # shellcheck disable=SC2086
  "$ZAYA" generate --model "$M" --prompt "And God said" --max-new-tokens 24 $args --full-sequence >"$WORK/full.txt"
  cmp -s "$WORK/cached.txt" "$WORK/full.txt" || fail "cached and full-sequence generation differ ($args): $(cat "$WORK/cached.txt") vs $(cat "$WORK/full.txt")"
done
echo "ok: cached decoder == full-sequence generation"

# A tiny positive temperature is greedy (red-team M3: T = 1e-9 sampled token 0
# or garbage), in the full-sequence and the cached (batched) generators.
"$ZAYA" generate --model "$M" --prompt "And God said" --max-new-tokens 12 --temperature 0 >"$WORK/greedy.txt"
for t in 1e-9 1e-12 1e-40 1e-300; do
  for mode in "" --full-sequence "--top-k 0 --top-p 1"; do
    # shellcheck disable=SC2086
    "$ZAYA" generate --model "$M" --prompt "And God said" --max-new-tokens 12 --temperature $t --seed 3 $mode \
      >"$WORK/tiny_t.txt"
    cmp -s "$WORK/greedy.txt" "$WORK/tiny_t.txt" ||
      fail "--temperature $t $mode is not greedy: $(cat "$WORK/tiny_t.txt") vs $(cat "$WORK/greedy.txt")"
  done
done
printf '{"prompt": "And God said", "max_new_tokens": 12, "temperature": %s, "seed": %d}\n' 0 1 1e-9 2 1e-300 3 \
  >"$WORK/tiny_t.jsonl"
"$ZAYA" generate --model "$M" --prompts "$WORK/tiny_t.jsonl" --batch 3 >"$WORK/tiny_t_batch.jsonl"
[[ $(grep -o '"completion":"[^"]*"' "$WORK/tiny_t_batch.jsonl" | sort -u | wc -l) == 1 ]] ||
  fail "batched tiny temperatures differ from greedy: $(cat "$WORK/tiny_t_batch.jsonl")"
echo "ok: tiny temperatures == greedy"

# The training checkpoint (step_N, metadata.json) loads like the exported directory.
ck=$(ls -d "$WORK/run/checkpoints"/step_* | tail -1)
[[ -f $ck/metadata.json ]] || fail "no training checkpoint under $WORK/run/checkpoints"
"$ZAYA" generate --model "$M" --prompt "In the beginning" --max-new-tokens 16 --seed 4 >"$WORK/from_final.txt"
"$ZAYA" generate --model "$ck" --tokenizer "$M/tokenizer.model" --prompt "In the beginning" --max-new-tokens 16 \
  --seed 4 >"$WORK/from_ckpt.txt"
cmp -s "$WORK/from_final.txt" "$WORK/from_ckpt.txt" || fail "checkpoint and exported weights generate differently"
echo "ok: training checkpoint == exported model directory"

# Batched JSONL requests (continuous batching over 2 slots) equal single runs.
cat >"$WORK/prompts.jsonl" <<'EOF'
{"prompt": "In the beginning", "seed": 1, "max_new_tokens": 12}
{"prompt": "And the LORD spake unto Moses, saying", "seed": 2, "max_new_tokens": 5}
{"prompt": "Blessed", "seed": 3, "max_new_tokens": 9, "temperature": 0}
EOF
"$ZAYA" generate --model "$M" --prompts "$WORK/prompts.jsonl" --batch 2 --step-tokens 8 --stats >"$WORK/batch.jsonl" 2>"$WORK/stats.txt"
[[ $(wc -l <"$WORK/batch.jsonl") == 3 ]] || fail "expected 3 JSONL results: $(cat "$WORK/batch.jsonl")"
grep -q "decode .* ms/step" "$WORK/stats.txt" || fail "no timing line: $(cat "$WORK/stats.txt")"
i=0
while IFS= read -r line; do
  prompt=$(sed -E 's/.*"prompt":"([^"]*)".*/\1/' <<<"$line")
  completion=$(sed -E 's/.*"completion":"([^"]*)".*/\1/' <<<"$line")
  seed=$((i + 1))
  n=$(sed -n "$((i + 1))p" "$WORK/prompts.jsonl" | sed -E 's/.*"max_new_tokens": ([0-9]+).*/\1/')
  extra=""
  [[ $i == 2 ]] && extra="--temperature 0"
  # shellcheck disable=SC2086
  single=$("$ZAYA" generate --model "$M" --prompt "$prompt" --seed $seed --max-new-tokens "$n" $extra)
  # JSON escapes newlines; compare with them escaped the same way.
  single_escaped=$(printf '%s' "${single#"$prompt"}" | sed -z 's/\n/\\n/g')
  [[ "$single_escaped" == "$completion" ]] || fail "request $i: batched '$completion' != single '$single_escaped'"
  i=$((i + 1))
done <"$WORK/batch.jsonl"
echo "ok: batched requests == single runs"

# A stop string ends the text before it.
"$ZAYA" generate --model "$M" --prompt "And" --temperature 0 --max-new-tokens 30 >"$WORK/free.txt"
word=$(head -c 12 "$WORK/free.txt" | tail -c 3)
"$ZAYA" generate --model "$M" --prompt "And" --temperature 0 --max-new-tokens 30 --stop "$word" >"$WORK/stopped.txt"
[[ $(wc -c <"$WORK/stopped.txt") -lt $(wc -c <"$WORK/free.txt") ]] || fail "--stop did not shorten the text"

# Speculative decoding (--spec ngram): greedy text equals plain greedy text, with a stop string inside an
# accepted run too; the stats and the JSON report the drafts; bad flags are usage errors.
printf 'And God said, Let there be light: and there was light. And God said, Let there be light' >"$WORK/rep.txt"
"$ZAYA" generate --model "$M" -f "$WORK/rep.txt" --temperature 0 --max-new-tokens 40 >"$WORK/plain_free.txt"
stopw=$(head -c 40 "$WORK/plain_free.txt" | tail -c 4)  # met late in the text: inside an accepted run
for with_stop in 1 0; do
  extra=()
  [[ $with_stop == 1 ]] && extra=(--stop "$stopw")
  "$ZAYA" generate --model "$M" -f "$WORK/rep.txt" --temperature 0 --max-new-tokens 40 "${extra[@]}" >"$WORK/plain_g.txt"
  for k in 1 4 8; do
    "$ZAYA" generate --model "$M" -f "$WORK/rep.txt" --temperature 0 --max-new-tokens 40 "${extra[@]}" --spec ngram \
      --spec-tokens $k --stats --json "$WORK/spec.json" >"$WORK/spec_g.txt" 2>"$WORK/spec_g.err"
    cmp -s "$WORK/plain_g.txt" "$WORK/spec_g.txt" ||
      fail "--spec ngram --spec-tokens $k ${extra[*]} differs from greedy: $(cat "$WORK/spec_g.txt") vs $(cat "$WORK/plain_g.txt")"
  done
done
grep -q "draft tokens accepted" "$WORK/spec_g.err" || fail "--spec --stats printed no acceptance: $(cat "$WORK/spec_g.err")"
[[ $(jq -r .spec.method "$WORK/spec.json") == ngram && $(jq .spec.drafts "$WORK/spec.json") -gt 0 ]] ||
  fail "--json has no speculative counts: $(cat "$WORK/spec.json")"
expect_error 2 "--spec lookahead is invalid; allowed: none, ngram" -- "$ZAYA" generate --model "$M" --prompt "And" \
  --spec lookahead
expect_error 2 "cannot be combined" -- "$ZAYA" generate --model "$M" --prompt "And" --spec ngram --full-sequence
echo "ok: --spec ngram == greedy ($(jq -r '"\(.spec.accepted_tokens) of \(.spec.drafted_tokens)"' "$WORK/spec.json") draft tokens accepted)"

# --spec-model: a draft model with its own cache (the model itself here: the same tokenizer) keeps the greedy
# text; a missing draft or one with another tokenizer fails naming both models.
"$ZAYA" generate --model "$M" -f "$WORK/rep.txt" --temperature 0 --max-new-tokens 40 --spec-model "$M" --spec-tokens 3 \
  --json "$WORK/specm.json" >"$WORK/specm.txt"
cmp -s "$WORK/plain_free.txt" "$WORK/specm.txt" ||
  fail "--spec-model differs from greedy: $(cat "$WORK/specm.txt") vs $(cat "$WORK/plain_free.txt")"
[[ $(jq -r .spec.method "$WORK/specm.json") == model && $(jq .spec.accepted_tokens "$WORK/specm.json") -gt 0 ]] ||
  fail "--spec-model --json has no accepted drafts: $(cat "$WORK/specm.json")"
expect_error 1 "--spec-model $WORK/nope: no such file or directory" -- "$ZAYA" generate --model "$M" --prompt "And" \
  --spec-model "$WORK/nope"
mkdir -p "$WORK/other_tok"
head -c 20000 "$SRC/data/kjv/kjv.txt" >"$WORK/other_tok/c.txt"
"$ZAYA" data tokenizer --corpus "$WORK/other_tok/c.txt" --vocab-size 400 --out "$WORK/other_tok/tok" >/dev/null
cp -r "$M" "$WORK/draft_other" && cp "$WORK/other_tok/tok.model" "$WORK/draft_other/tokenizer.model"
expect_error 1 "--spec-model $WORK/draft_other: its tokenizer .* has 400 pieces, the target $M.s .* has 512" -- \
  "$ZAYA" generate --model "$M" --prompt "And" --spec-model "$WORK/draft_other"
expect_error 2 "--spec model needs the draft model: --spec-model DIR" -- "$ZAYA" generate --model "$M" --prompt "And" \
  --spec model
"$ZAYA" bench infer --model "$M" --spec-model "$M" --spec-tokens 2 --no-prefill --batch 1 --context 16 --decode-steps 2 \
  --warmup 1 --no-working-set --json "$WORK/bench_draft.json" >/dev/null
[[ $(jq '.decode[0].draft_ms_per_step > 0' "$WORK/bench_draft.json") == true ]] ||
  fail "bench infer --spec-model timed no draft: $(cat "$WORK/bench_draft.json")"
echo "ok: --spec-model == greedy ($(jq -r '"\(.spec.accepted_tokens) of \(.spec.drafted_tokens)"' "$WORK/specm.json") draft tokens accepted)"

# score: cached == full-sequence.
echo '[[2, 100, 200, 300, 1], [2, 7, 8]]' >"$WORK/ids.json"
"$ZAYA" score --model "$M" --tokens "$WORK/ids.json" >"$WORK/s1.txt"
"$ZAYA" score --model "$M" --tokens "$WORK/ids.json" --full-sequence >"$WORK/s2.txt"
paste "$WORK/s1.txt" "$WORK/s2.txt" | awk -F'loss ' '{ split($2, a, " "); split($3, b, " "); d = a[1] - b[1];
  if (d > 1e-4 || d < -1e-4) { print "differ: " $0; exit 1 } }' || fail "score differs from --full-sequence"

# eval: perplexity of text and shards, multiple choice.
awk 'NR > 30 && NR < 45' "$SRC/data/kjv/kjv.txt" >"$WORK/heldout.txt"
cat >"$WORK/mc.jsonl" <<'EOF'
{"context": "In the beginning God created the", "choices": [" heaven and the earth.", " sea"], "gold": 0, "id": 1}
{"context": "And God said, Let there be ", "choices": ["light", "darkness"], "gold": 0}
{"context_ids": [2, 100, 200], "choices_ids": [[5], [6, 7]], "gold": 1}
EOF
"$ZAYA" eval --model "$M" --text "$WORK/heldout.txt" --shards "$WORK/data/val" --max-tokens 1500 --context 128 \
  --mc "$WORK/mc.jsonl" --json "$WORK/eval.json" --per-item "$WORK/items.jsonl" | tee "$WORK/eval.txt"
grep -q "perplexity .*heldout.txt (text).*ppl [0-9.]*, [0-9.]* bits/byte" "$WORK/eval.txt" || fail "no text perplexity"
grep -q "perplexity .*data/val (shards).*ppl [0-9.]*" "$WORK/eval.txt" || fail "no shard perplexity"
grep -q "multiple choice .*mc.jsonl: 3 items: acc [0-9.]* ± [0-9.]*, acc_norm" "$WORK/eval.txt" || fail "no mc line"
grep -q '"acc_norm"' "$WORK/eval.json" || fail "eval JSON"
[[ $(wc -l <"$WORK/items.jsonl") == 3 ]] || fail "per-item output"

# A window longer than the run's train.seq_len (64) gets a note naming the
# run's config and the --context that matches training (red-team M6); the
# default window (the model's 1024 positions) is one. A checkpoint records its
# config too. At the training length there is no note.
"$ZAYA" eval --model "$M" --shards "$WORK/data/val" --max-tokens 300 --json "$WORK/eval_default.json" \
  >"$WORK/eval_default.txt" 2>&1 || fail "eval at the default context: $(cat "$WORK/eval_default.txt")"
grep -q "note: the perplexity window is 1024 tokens (the default: .*), but the model was trained on sequences of 64 ($WORK/run/config.toml).*--context 64 measures what training measured" \
  "$WORK/eval_default.txt" || fail "no note on the context beyond training: $(cat "$WORK/eval_default.txt")"
grep -q '"trained_seq_len": 64' "$WORK/eval_default.json" || fail "eval JSON lacks trained_seq_len"
"$ZAYA" eval --model "$ck" --tokenizer "$M/tokenizer.model" --shards "$WORK/data/val" --max-tokens 300 --context 100 \
  >"$WORK/eval_ck.txt" 2>&1 || fail "eval of the checkpoint: $(cat "$WORK/eval_ck.txt")"
grep -q "window is 100 tokens (--context), but the model was trained on sequences of 64 ($ck/metadata.json (config))" \
  "$WORK/eval_ck.txt" || fail "no note for the checkpoint: $(cat "$WORK/eval_ck.txt")"
"$ZAYA" eval --model "$M" --shards "$WORK/data/val" --max-tokens 300 --context 64 >"$WORK/eval_64.txt" 2>&1
! grep -q "note:" "$WORK/eval_64.txt" || fail "a note at the training length: $(cat "$WORK/eval_64.txt")"
echo "ok: eval notes a window past the training seq_len"

# bench infer: a few points, with the roofline in the JSON.
"$ZAYA" bench infer --preset tiny --prefill 32 --batch 1,2 --context 16 --decode-steps 3 --warmup 1 \
  --json "$WORK/bench.json" | tee "$WORK/bench.txt"
grep -q '"ratio_to_roofline"' "$WORK/bench.json" || fail "bench JSON lacks the roofline"
grep -q "STREAM triad" "$WORK/bench.txt" || fail "bench prints no bandwidth"

# Bad input: clear errors naming the file, field or flag.
expect_error 2 "nothing to evaluate" -- "$ZAYA" eval --model "$M"
expect_error 2 "--dtype 'int4' is invalid; allowed: auto, bf16, f32, int8" -- "$ZAYA" generate --model "$M" --dtype int4
echo '{"context_ids": [2], "choices_ids": [[3]], "gold": 4}' >"$WORK/badmc.jsonl"
expect_error 1 "badmc.jsonl:1: \"gold\" = 4 is invalid" -- "$ZAYA" eval --model "$M" --mc "$WORK/badmc.jsonl"
echo '{"prompt": "x", "temprature": 1}' >"$WORK/badprompts.jsonl"
expect_error 1 "badprompts.jsonl:1: unknown key \"temprature\"" -- "$ZAYA" generate --model "$M" --prompts "$WORK/badprompts.jsonl"
"$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --vocab-size 1024 --out "$WORK/big" >/dev/null
expect_error 1 "big.model' has 1024 pieces but model .* has only 512 embedding rows" -- \
  "$ZAYA" generate --model "$M" --tokenizer "$WORK/big.model" --prompt x
cp -r "$M" "$WORK/wrongcfg"
sed -i 's/"kv_channels": 32/"kv_channels": 16/' "$WORK/wrongcfg/config.json"
expect_error 1 "expected shape" -- "$ZAYA" eval --model "$WORK/wrongcfg" --shards "$WORK/data/val"
cp -r "$M" "$WORK/unknown"
sed -i 's/"rope_theta"/"rope_thetta"/' "$WORK/unknown/config.json"
expect_error 1 'unknown config key "rope_thetta"' -- "$ZAYA" generate --model "$WORK/unknown" --prompt x
expect_error 2 "give exactly one of --preset and --model" -- "$ZAYA" bench infer
echo "infer: OK"
