#!/usr/bin/env bash
# zaya serve with real clients: curl and the official `openai` Python client
# (pinned in scripts/python-requirements.txt, from the cached environment that
# scripts/python-env.sh makes; the test fails when PyPI cannot be reached). The server's completion
# equals zaya generate's for the same seed, whole and streamed; chat uses the
# template; n, logprobs, stop and echo through the client (serve_openai.py);
# bad requests get 400s naming the field, and the client raises its own
# exception types for them; the tokenizer endpoints answer; a client that goes
# away cancels its request; the server always stops (trap).
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
# A model wide and deep enough (about 20M parameters) that a 1000-token request
# takes seconds, so the cancellation check below cannot race a finished request.
write_config train.toml 2
sed -i 's/^num_blocks = 2$/num_blocks = 8\nhidden_size = 512\nq_heads = 4\nhead_dim = 64\nexpert_ffn = 512/' "$WORK/train.toml"
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
M=$WORK/run/final

# --- the openai client: the pinned Python environment (made once, then cached) ---
PYTHON=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
OPENAI_VERSION=$("$PYTHON" -c 'import openai; print(openai.__version__)')

# --- start the server on a free loopback port; always stop it ---
KEY=test-key
start_serve "$KEY" "$M" --batch 4 --threads 2 --request-timeout 60
AUTH=(-H "Authorization: Bearer $KEY" -H "Content-Type: application/json")
echo "ok: zaya serve listens on $URL"

# --- curl: health, models, a completion equal to zaya generate's ---
curl -sf "$URL/health" | grep -q '"status":"ok"' || fail "/health"
curl -sf "${AUTH[@]}" "$URL/v1/models" | jq -e '.data[0].id == "run"' >/dev/null || fail "/v1/models: $(curl -s "${AUTH[@]}" "$URL/v1/models")"
echo '{"prompt": "In the beginning", "seed": 3, "temperature": 0.8, "top_k": 40, "top_p": 0.95}' >"$WORK/p.jsonl"
"$ZAYA" generate --model "$M" --threads 2 --max-new-tokens 16 --prompts "$WORK/p.jsonl" >"$WORK/generate.jsonl"
WANT=$(jq -r .completion "$WORK/generate.jsonl")
BODY='{"model": "final", "prompt": "In the beginning", "max_tokens": 16, "seed": 3, "temperature": 0.8, "top_k": 40, "top_p": 0.95'
GOT=$(curl -sf "${AUTH[@]}" -d "$BODY}" "$URL/v1/completions" | jq -r '.choices[0].text')
[[ "$GOT" == "$WANT" ]] || fail "server completion '$GOT' != zaya generate '$WANT'"
GOT=$(curl -sfN "${AUTH[@]}" -d "$BODY, \"stream\": true}" "$URL/v1/completions" | sed -n 's/^data: //p' |
  grep -v '^\[DONE\]$' | jq -j '.choices[0].text')
[[ "$GOT" == "$WANT" ]] || fail "streamed completion '$GOT' != zaya generate '$WANT'"
curl -sfN "${AUTH[@]}" -d "$BODY, \"stream\": true}" "$URL/v1/completions" | tail -2 | grep -q '^data: \[DONE\]$' ||
  fail "the stream does not end with data: [DONE]"
echo "ok: curl completion (whole and streamed) == zaya generate: $(head -c 60 <<<"$WANT")"

# --- ignore_eos (vLLM's extension): the completion runs to max_tokens, as zaya generate --ignore-eos's ---
"$ZAYA" generate --model "$M" --threads 2 --max-new-tokens 48 --ignore-eos --prompts "$WORK/p.jsonl" >"$WORK/past_eos.jsonl"
PAST=$(curl -sf "${AUTH[@]}" -d '{"prompt": "In the beginning", "max_tokens": 48, "seed": 3, "temperature": 0.8,
  "top_k": 40, "top_p": 0.95, "ignore_eos": true}' "$URL/v1/completions") || fail "ignore_eos: the request failed"
jq -e '.usage.completion_tokens == 48 and .choices[0].finish_reason == "length"' <<<"$PAST" >/dev/null ||
  fail "ignore_eos: not 48 tokens to the limit: $PAST"
[[ $(jq -r '.choices[0].text' <<<"$PAST") == "$(jq -r .completion "$WORK/past_eos.jsonl")" ]] ||
  fail "ignore_eos: server '$(jq -r '.choices[0].text' <<<"$PAST")' != zaya generate --ignore-eos '$(jq -r .completion "$WORK/past_eos.jsonl")'"
[[ $(jq '.tokens | length' "$WORK/past_eos.jsonl") == 48 ]] || fail "zaya generate --ignore-eos: $(cat "$WORK/past_eos.jsonl")"
echo "ok: ignore_eos runs to max_tokens (48), as zaya generate --ignore-eos"

# --- bad requests: 400 naming the field, 401 without the key, 404 elsewhere ---
expect_status() {
  local want=$1 pattern=$2; shift 2
  local out code
  out=$(curl -s -w '\n%{http_code}' "$@")
  code=$(tail -1 <<<"$out")
  [[ $code == "$want" ]] || fail "expected HTTP $want, got $code from curl $*: $out"
  grep -Eq -- "$pattern" <<<"$out" || fail "the $code response to curl $* lacks /$pattern/: $out"
  echo "ok: HTTP $code: $(head -1 <<<"$out" | head -c 150)"
}
expect_status 400 '"param":"temperature"' "${AUTH[@]}" -d '{"prompt": "x", "temperature": 7}' "$URL/v1/completions"
expect_status 400 '"param":"max_tokens"' "${AUTH[@]}" -d '{"prompt": "x", "max_tokens": "ten"}' "$URL/v1/completions"
expect_status 400 'invalid JSON' "${AUTH[@]}" -d '{"prompt": ' "$URL/v1/completions"
expect_status 400 "'ignore_eos' must be true or false.*\"param\":\"ignore_eos\"" "${AUTH[@]}" \
  -d '{"messages": [{"role": "user", "content": "x"}], "ignore_eos": "yes"}' "$URL/v1/chat/completions"
expect_status 400 'roles must alternate.*"param":"messages"' "${AUTH[@]}" \
  -d '{"messages": [{"role": "assistant", "content": "x"}]}' "$URL/v1/chat/completions"
expect_status 400 'leaves no room.*"param":"prompt"' "${AUTH[@]}" \
  -d "{\"prompt\": \"$(head -c 9000 "$SRC/data/kjv/kjv.txt" | tr '\n"\\' '   ')\"}" "$URL/v1/completions"
expect_status 401 'invalid_api_key' -H 'Content-Type: application/json' -d '{"prompt": "x"}' "$URL/v1/completions"
expect_status 404 'not an endpoint' "${AUTH[@]}" "$URL/v1/embeddings"

# --- a body nested 100k deep is a 400 and the server lives on; lm-eval's loglikelihood body is scored ---
{ printf '{"prompt": "a", "stop": '; head -c 100000 /dev/zero | tr '\0' '['; head -c 100000 /dev/zero | tr '\0' ']'; printf '}'; } >"$WORK/nest.json"
expect_status 400 'nests deeper than 128 levels' "${AUTH[@]}" --data-binary @"$WORK/nest.json" "$URL/v1/completions"
curl -sf "$URL/health" >/dev/null || fail "zaya serve died on a deeply nested body"
LL=$(curl -sf "${AUTH[@]}" -d '{"prompt": [[2, 100, 200], [2, 300, 301, 302]], "temperature": 0, "max_tokens": 1,
  "logprobs": 1, "echo": true, "seed": 1234}' "$URL/v1/completions") || fail "lm-eval's loglikelihood body failed"
jq -e '(.choices | length) == 2 and .choices[1].index == 1 and (.choices[1].logprobs.token_logprobs | length) == 5
  and .choices[1].logprobs.token_logprobs[0] == null
  and ([.choices[1].logprobs.token_logprobs[1:-1][] | select(. < 0)] | length) == 3
  and ([.choices[1].logprobs.top_logprobs[1:-1][] | length] == [1, 1, 1])' <<<"$LL" >/dev/null ||
  fail "lm-eval's loglikelihood body: $LL"
echo "ok: a 100k-deep body is refused; echo with logprobs for a batch of token-id prompts"

# --- the tokenizer endpoints (lm-evaluation-harness's remote tokenizer; tests/e2e/lmeval.sh runs the harness) ---
IDS=$(curl -sf "${AUTH[@]}" -d '{"prompt": "<bos>In the beginning<eos>", "add_special_tokens": false}' "$URL/tokenize" |
  jq -c .tokens) || fail "/tokenize"
[[ $(jq '.[0]' <<<"$IDS") == 2 && $(jq '.[-1]' <<<"$IDS") == 1 ]] || fail "/tokenize: special-token text is not one id: $IDS"
[[ $(curl -sf "${AUTH[@]}" -d "{\"tokens\": $IDS}" "$URL/detokenize" | jq -r .prompt) == "In the beginning" ]] ||
  fail "/detokenize of $IDS"
curl -sf "${AUTH[@]}" "$URL/tokenizer_info" | jq -e '.eos_token == "<eos>" and .bos_token == "<bos>"' >/dev/null ||
  fail "/tokenizer_info: $(curl -s "${AUTH[@]}" "$URL/tokenizer_info")"
expect_status 400 '"param":"tokens"' "${AUTH[@]}" -d '{"tokens": [1, 99999]}' "$URL/detokenize"
expect_status 401 'invalid_api_key' -H 'Content-Type: application/json' -d '{"prompt": "x"}' "$URL/tokenize"
echo "ok: /tokenize, /detokenize, /tokenizer_info"

# --- the openai Python client ---
"$PYTHON" "$SRC/tests/e2e/serve_openai.py" "$URL/v1" "$KEY" "$WANT" >"$WORK/openai.jsonl" 2>"$WORK/openai.err" ||
  fail "the openai client failed: $(cat "$WORK/openai.err")"
check() { jq -r "select(.check == \"$1\") | $2" "$WORK/openai.jsonl"; }
[[ "$(check completion .text)" == "$WANT" ]] || fail "openai completion '$(check completion .text)' != '$WANT'"
[[ "$(check completion_stream .text)" == "$WANT" ]] || fail "openai streamed completion differs: $(check completion_stream .text)"
[[ -n "$(check completion_stream .finish)" && "$(check completion_stream .finish)" != null ]] || fail "no finish_reason in the stream"
[[ "$(check chat .role)" == assistant && "$(check chat_stream .role)" == assistant ]] || fail "chat roles: $(cat "$WORK/openai.jsonl")"
[[ "$(check chat .text)" == "$(check chat_stream .text)" ]] || fail "chat whole '$(check chat .text)' != streamed '$(check chat_stream .text)'"
[[ "$(check chat_stream_usage .usage.completion_tokens)" -ge 1 ]] || fail "no usage chunk: $(cat "$WORK/openai.jsonl")"
[[ "$(check bad_request .status)" == 400 && "$(check bad_request .param)" == max_tokens ]] ||
  fail "openai bad request: $(check bad_request .)"
echo "ok: openai $OPENAI_VERSION (Python): completions and chat, whole and streamed, n, logprobs, stop, echo; errors as"
echo "    BadRequestError, AuthenticationError, NotFoundError and APIStatusError (413)"

# --- a client that goes away cancels its request ---
LONG='{"prompt": "And", "max_tokens": 1000, "n": 4, "temperature": 1, "stop": []}'
curl -s --max-time 1 "${AUTH[@]}" -d "$LONG" "$URL/v1/completions" >/dev/null || true
curl -s --max-time 1 -N "${AUTH[@]}" -d "${LONG%\}}, \"stream\": true}" "$URL/v1/completions" >/dev/null || true
for _ in $(seq 50); do
  M_TEXT=$(curl -sf "$URL/metrics")
  grep -q '^zaya_requests_cancelled_total 2$' <<<"$M_TEXT" && grep -q '^zaya_sequences_running 0$' <<<"$M_TEXT" && break
  sleep 0.2
done
grep -q '^zaya_requests_cancelled_total 2$' <<<"$M_TEXT" || fail "the two abandoned requests were not cancelled: $(grep -E 'cancelled|running' <<<"$M_TEXT")"
grep -q '^zaya_sequences_running 0$' <<<"$M_TEXT" || fail "sequences still running after their clients left"
grep -q '^zaya_time_to_first_token_seconds_count [1-9]' <<<"$M_TEXT" || fail "no time-to-first-token samples"
grep -q '^# TYPE zaya_inter_token_latency_seconds histogram$' <<<"$M_TEXT" || fail "no inter-token histogram"
echo "ok: abandoned requests cancelled; /metrics: $(grep -c '^zaya_' <<<"$M_TEXT") samples"

# --- the server stops on SIGTERM ---
kill -TERM $SERVER
for _ in $(seq 50); do kill -0 $SERVER 2>/dev/null || break; sleep 0.2; done
kill -0 $SERVER 2>/dev/null && fail "zaya serve did not stop on SIGTERM"
echo "ok: zaya serve stopped on SIGTERM"
