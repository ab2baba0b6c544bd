#!/usr/bin/env bash
# zaya generate as a batch server and as a prompt reader: --prompts echoes each
# request's id; a request that cannot run gets an error result line (file:line)
# while the others run, and the exit code is 1 once every line is out; a prompt
# too long for the context is refused before anything is printed; a stop at the
# context limit is noted on stderr; prompts from --prompt-file / -f and stdin.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config train.toml 12
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
M=$WORK/run/final
G=("$ZAYA" generate --model "$M" --threads 1)

# A prompt longer than the tiny preset's 1024 positions (about 3 characters per token), on one line.
head -c 9000 "$SRC/data/kjv/kjv.txt" | tr '\n"\\' '   ' >"$WORK/long.txt"

# --- 1. ids echoed, in input order ---
cat >"$WORK/ok.jsonl" <<'JSONL'
{"prompt": "In the beginning", "id": "a", "seed": 1}
{"prompt": "And God said", "id": 2, "seed": 2}

{"prompt": "Blessed", "id": {"k": [1, "x"]}, "temperature": 0}
{"prompt": "And"}
JSONL
"${G[@]}" --max-new-tokens 8 --prompts "$WORK/ok.jsonl" --batch 2 >"$WORK/ok.out"
[[ $(wc -l <"$WORK/ok.out") == 4 ]] || fail "expected 4 result lines: $(cat "$WORK/ok.out")"
for want in '^\{"index":0,"id":"a","prompt":"In the beginning","completion":' '^\{"index":1,"id":2,' \
  '^\{"index":2,"id":\{"k":\[1,"x"\]\},' '^\{"index":3,"id":null,'; do
  grep -Eq -- "$want" "$WORK/ok.out" || fail "no result line matches /$want/: $(cat "$WORK/ok.out")"
done
echo "ok: --prompts echoes every id"

# --- 2. bad requests get error lines; the others run as they do alone ---
{
  sed -n 1p "$WORK/ok.jsonl"
  printf '{"prompt": "%s", "id": "long"}\n' "$(cat "$WORK/long.txt")"
  echo '{"prompt": "And", "id": "neg", "max_new_tokens": -1}'
  echo '{oops'
  sed -n 2p "$WORK/ok.jsonl"
} >"$WORK/mixed.jsonl"
rc=0
"${G[@]}" --max-new-tokens 8 --prompts "$WORK/mixed.jsonl" --batch 2 >"$WORK/mixed.out" 2>"$WORK/mixed.err" || rc=$?
[[ $rc == 1 ]] || fail "a batch with failed requests exited $rc, not 1: $(cat "$WORK/mixed.err")"
[[ $(wc -l <"$WORK/mixed.out") == 5 ]] || fail "expected 5 result lines: $(cat "$WORK/mixed.out")"
sed -n 2p "$WORK/mixed.out" | grep -Eq '^\{"index":1,"id":"long","prompt":".*","finish_reason":"error","error":".*mixed.jsonl:2: the prompt \([0-9]+ tokens\) leaves no room under max_position_embeddings \(1024\)"\}$' ||
  fail "line 2's result: $(sed -n 2p "$WORK/mixed.out" | tail -c 300)"
sed -n 3p "$WORK/mixed.out" | grep -Fq '"id":"neg","prompt":"And","finish_reason":"error","error":"'"$WORK"'/mixed.jsonl:3: \"max_new_tokens\" = -1 is invalid; allowed: >= 0"}' ||
  fail "line 3's result: $(sed -n 3p "$WORK/mixed.out")"
sed -n 4p "$WORK/mixed.out" | grep -Eq '^\{"index":3,"id":null,"prompt":null,"finish_reason":"error","error":".*mixed.jsonl:4: invalid JSON' ||
  fail "line 4's result: $(sed -n 4p "$WORK/mixed.out")"
# The valid requests give what they give in a batch of valid requests only.
[[ $(sed -n 1p "$WORK/mixed.out") == "$(sed -n 1p "$WORK/ok.out")" ]] || fail "request a differs beside failed ones"
[[ $(sed -n 5p "$WORK/mixed.out" | sed 's/^{"index":4,/{/') == "$(sed -n 2p "$WORK/ok.out" | sed 's/^{"index":1,/{/')" ]] ||
  fail "request 2 differs beside failed ones: $(sed -n 5p "$WORK/mixed.out") vs $(sed -n 2p "$WORK/ok.out")"
grep -q "mixed.jsonl:2: the prompt .* (this request is skipped)" "$WORK/mixed.err" || fail "no per-request error: $(cat "$WORK/mixed.err")"
grep -q "error: 3 of 5 requests failed (.*mixed.jsonl:2, .*mixed.jsonl:3, .*mixed.jsonl:4); their result lines" "$WORK/mixed.err" ||
  fail "no failure summary: $(cat "$WORK/mixed.err")"
echo "ok: failed requests answered with errors, the others run, exit 1"

# --- 3. nothing is printed before a single prompt is checked ---
rc=0
"${G[@]}" --max-new-tokens 8 --prompt "$(cat "$WORK/long.txt")" >"$WORK/long.out" 2>"$WORK/long.err" || rc=$?
[[ $rc == 1 ]] || fail "a too-long --prompt exited $rc"
[[ ! -s $WORK/long.out ]] || fail "a refused prompt was echoed: $(head -c 100 "$WORK/long.out")"
grep -Eq "^error: --prompt: the prompt \([0-9]+ tokens\) leaves no room under max_position_embeddings \(1024\)$" "$WORK/long.err" ||
  fail "too-long --prompt: $(cat "$WORK/long.err")"
rc=0
"${G[@]}" --max-new-tokens 8 --prompt-file "$WORK/long.txt" --samples 2 >"$WORK/long.out" 2>"$WORK/long.err" || rc=$?
[[ $rc == 1 && ! -s $WORK/long.out ]] || fail "a too-long --prompt-file: exit $rc, output $(head -c 100 "$WORK/long.out")"
grep -q "error: --prompt-file $WORK/long.txt: the prompt (" "$WORK/long.err" || fail "too-long file: $(cat "$WORK/long.err")"
expect_error 1 "--prompt: the prompt \([0-9]+ tokens\) leaves no room under --max-context \(4\)" -- \
  "${G[@]}" --max-new-tokens 8 --prompt "In the beginning God created" --max-context 4
echo "ok: a prompt too long for the context is refused before anything is printed"

# --- 4. a stop at the context limit is noted ---
"${G[@]}" --prompt "And" --max-new-tokens 100 --max-context 12 --temperature 0 >"$WORK/ctx.out" 2>"$WORK/ctx.err"
grep -qx "note: stopped at the context limit (12 tokens)" "$WORK/ctx.err" || fail "no context note: $(cat "$WORK/ctx.err")"
"${G[@]}" --prompt "And" --max-new-tokens 5 --temperature 0 >/dev/null 2>"$WORK/noctx.err"
[[ ! -s $WORK/noctx.err ]] || fail "a note without a context stop: $(cat "$WORK/noctx.err")"
"${G[@]}" --prompts "$WORK/ok.jsonl" --max-new-tokens 100 --max-context 12 >"$WORK/ctxb.out" 2>"$WORK/ctxb.err"
[[ $(grep -c '"finish_reason":"context"' "$WORK/ctxb.out") == 4 ]] || fail "batch context stops: $(cat "$WORK/ctxb.out")"
grep -q 'note: 4 requests stopped at the context limit (12 tokens)' "$WORK/ctxb.err" || fail "batch note: $(cat "$WORK/ctxb.err")"
echo "ok: context-limit notes"

# --- 5. prompts from a file, -f, stdin; BOS alone ---
"${G[@]}" --max-new-tokens 8 --prompt "In the beginning" --seed 4 >"$WORK/p.out"
printf 'In the beginning\n' >"$WORK/p.txt"
"${G[@]}" --max-new-tokens 8 --prompt-file "$WORK/p.txt" --seed 4 >"$WORK/pf.out"
cmp -s "$WORK/p.out" "$WORK/pf.out" || fail "--prompt-file differs from --prompt: $(cat "$WORK/pf.out") vs $(cat "$WORK/p.out")"
"${G[@]}" --max-new-tokens 8 -f - --seed 4 <"$WORK/p.txt" >"$WORK/pstdin.out"
cmp -s "$WORK/p.out" "$WORK/pstdin.out" || fail "-f - differs from --prompt"
"${G[@]}" --max-new-tokens 8 --prompts - --batch 2 <"$WORK/ok.jsonl" >"$WORK/stdin.out"
cmp -s "$WORK/ok.out" "$WORK/stdin.out" || fail "--prompts - differs from --prompts FILE"
printf '{"prompt": "x", "top_k": -2}\n' | { "${G[@]}" --max-new-tokens 8 --prompts - >"$WORK/stdinbad.out" 2>"$WORK/stdinbad.err" && fail "bad stdin line exited 0"; } || true
grep -q '"error":"<stdin>:1: --top-k -2 is invalid' "$WORK/stdinbad.out" || fail "stdin error line: $(cat "$WORK/stdinbad.out")"
"${G[@]}" --max-new-tokens 8 --seed 1 >"$WORK/bos.out"
[[ -s $WORK/bos.out ]] || fail "no text from BOS alone"
expect_error 1 "the prompt is empty and --no-bos leaves no token to start from" -- "${G[@]}" --max-new-tokens 8 --no-bos
expect_error 2 "^error: --prompt and --prompt-file cannot be used together" -- "${G[@]}" --max-new-tokens 8 --prompt x --prompt-file "$WORK/p.txt"
expect_error 2 "cannot be used together" -- "${G[@]}" --max-new-tokens 8 --prompts "$WORK/ok.jsonl" -f "$WORK/p.txt"
expect_error 1 "--prompt-file: cannot read '$WORK/none.txt'" -- "${G[@]}" --max-new-tokens 8 --prompt-file "$WORK/none.txt"
printf 'caf\xe9\n' >"$WORK/latin1.txt"
expect_error 1 "latin1.txt: line 1: invalid UTF-8 \(byte 0xe9 at column 4\)" -- "${G[@]}" --max-new-tokens 8 -f "$WORK/latin1.txt"
echo "ok: prompts from files and stdin"
echo "generate_batch: OK"
