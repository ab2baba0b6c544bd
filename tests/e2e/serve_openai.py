"""The official `openai` Python client against zaya serve (run by tests/e2e/serve.sh
with the pinned environment of scripts/python-env.sh): completions and chat, whole
and streamed, streamed usage, and a bad request, printed as one JSON line per check
for the shell test to compare; then checked here: `n`, `logprobs` (completions and
chat, whole and streamed), `stop`, echo with token-id prompts, and errors surfacing
as the client's exception types. Exits non-zero on any unexpected error or answer.

Usage: serve_openai.py BASE_URL API_KEY WANT
(WANT: zaya generate's text for "In the beginning" with the sampling below.)
"""
import json
import sys

import openai

base_url, api_key, want = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
# top_k is not an OpenAI parameter: the client sends it through extra_body, as vLLM's users do.
sampling = dict(max_tokens=16, seed=3, temperature=0.8, top_p=0.95, extra_body={"top_k": 40})


def out(**fields):
    print(json.dumps(fields), flush=True)


c = client.completions.create(model="tiny", prompt="In the beginning", **sampling)
out(check="completion", text=c.choices[0].text, finish=c.choices[0].finish_reason,
    usage=c.usage.model_dump() if c.usage else None)

streamed, finish = "", None
for chunk in client.completions.create(model="tiny", prompt="In the beginning", stream=True, **sampling):
    if chunk.choices:
        streamed += chunk.choices[0].text or ""
        finish = chunk.choices[0].finish_reason or finish
out(check="completion_stream", text=streamed, finish=finish)

messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "And God said"}]
chat = client.chat.completions.create(model="tiny", messages=messages, **sampling)
out(check="chat", text=chat.choices[0].message.content, role=chat.choices[0].message.role,
    finish=chat.choices[0].finish_reason)

chat_streamed, role = "", None
for chunk in client.chat.completions.create(model="tiny", messages=messages, stream=True,
                                            stream_options={"include_usage": True}, **sampling):
    if chunk.usage:
        out(check="chat_stream_usage", usage=chunk.usage.model_dump())
    if chunk.choices:
        delta = chunk.choices[0].delta
        role = delta.role or role
        chat_streamed += delta.content or ""
out(check="chat_stream", text=chat_streamed, role=role)

try:
    client.completions.create(model="tiny", prompt="x", max_tokens=-5)
    out(check="bad_request", status=200)
except openai.APIStatusError as e:
    body = e.body if isinstance(e.body, dict) else {}
    out(check="bad_request", status=e.status_code, param=body.get("param"), message=str(e))


def expect(ok, message):
    if not ok:
        print(f"FAIL: {message}", file=sys.stderr, flush=True)
        sys.exit(1)


# --- n: choice i samples with seed + i; choice 0 is zaya generate's text ---
c = client.completions.create(model="tiny", prompt="In the beginning", n=3, **sampling)
expect([x.index for x in c.choices] == [0, 1, 2], f"n=3 choices: {c.choices}")
expect(c.choices[0].text == want, f"n=3 choice 0 {c.choices[0].text!r} != {want!r}")
chat_n = client.chat.completions.create(model="tiny", messages=messages, n=2, **sampling)
expect([x.index for x in chat_n.choices] == [0, 1] and all(x.message.role == "assistant" for x in chat_n.choices),
       f"chat n=2: {chat_n.choices}")
out(check="n", texts=[x.text for x in c.choices])

# --- logprobs: completions (top alternatives per token) and chat, whole and streamed ---
c = client.completions.create(model="tiny", prompt="In the beginning", logprobs=2, **sampling)
lp = c.choices[0].logprobs
expect(c.choices[0].text == want, "logprobs change the text")
expect("".join(lp.tokens) == want, f"the logprob tokens {lp.tokens} do not spell the text {want!r}")
expect(len(lp.token_logprobs) == len(lp.tokens) == c.usage.completion_tokens, "one logprob per generated token")
expect(all(len(t) <= 2 and max(t.values()) >= l - 1e-6 for t, l in zip(lp.top_logprobs, lp.token_logprobs)),
       f"top_logprobs: {lp.top_logprobs}")
expect(lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset), f"text_offset {lp.text_offset}")
streamed_lp = []
for chunk in client.completions.create(model="tiny", prompt="In the beginning", logprobs=2, stream=True, **sampling):
    if chunk.choices and chunk.choices[0].logprobs:
        streamed_lp += chunk.choices[0].logprobs.token_logprobs
expect(streamed_lp == lp.token_logprobs, "streamed completion logprobs differ from the whole response's")
chat = client.chat.completions.create(model="tiny", messages=messages, logprobs=True, top_logprobs=3, **sampling)
content = chat.choices[0].logprobs.content
expect("".join(t.token for t in content) == chat.choices[0].message.content, "chat logprob tokens spell the text")
expect(all(len(t.top_logprobs) == 3 and t.top_logprobs[0].logprob >= t.logprob - 1e-6 for t in content),
       "chat top_logprobs")
expect(all(bytes(t.bytes) == t.token.encode() for t in content if t.bytes is not None), "chat logprob bytes")
chat_streamed_lp = []
for chunk in client.chat.completions.create(model="tiny", messages=messages, logprobs=True, top_logprobs=3,
                                            stream=True, **sampling):
    if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
        chat_streamed_lp += [t.logprob for t in chunk.choices[0].logprobs.content]
expect(chat_streamed_lp == [t.logprob for t in content], "streamed chat logprobs differ from the whole response's")
out(check="logprobs", tokens=len(lp.tokens), chat_tokens=len(content))

# --- stop: the text ends before the first stop string, finish_reason "stop" ---
stop = want[len(want) // 2:len(want) // 2 + 2]
c = client.completions.create(model="tiny", prompt="In the beginning", stop=[stop, "\u2603"], **sampling)
expect(c.choices[0].text == want[:want.find(stop)] and c.choices[0].finish_reason == "stop",
       f"stop {stop!r}: {c.choices[0].text!r} ({c.choices[0].finish_reason}), want {want[:want.find(stop)]!r}")
streamed = "".join(ch.choices[0].text for ch in client.completions.create(
    model="tiny", prompt="In the beginning", stop=stop, stream=True, **sampling) if ch.choices)
expect(streamed == want[:want.find(stop)], f"streamed with stop {stop!r}: {streamed!r}")
out(check="stop", stop=stop, text=c.choices[0].text)

# --- echo with logprobs for a batch of token-id prompts: lm-evaluation-harness's loglikelihood body ---
c = client.completions.create(model="tiny", prompt=[[2, 100, 200], [2, 300, 301, 302]], max_tokens=1, logprobs=1,
                              echo=True, temperature=0, seed=1234)
expect([len(x.logprobs.token_logprobs) for x in c.choices] == [4, 5], "echo: prompt logprobs and the generated one")
expect(all(x.logprobs.token_logprobs[0] is None and x.logprobs.top_logprobs[0] is None for x in c.choices),
       "echo: the first prompt token has no logprob")
out(check="echo", choices=len(c.choices))

# --- errors surface as the client's exception types ---
def raises(kind, call, param=None):
    try:
        call()
    except kind as e:
        body = e.body if isinstance(e.body, dict) else {}
        expect(param is None or body.get("param") == param, f"{kind.__name__}: param {body.get('param')!r}")
        expect(len(str(body.get("message", "")).split()) >= 4, f"{kind.__name__}: no sentence: {body}")
        return e
    except Exception as e:  # noqa: BLE001 - any other type is the failure reported
        expect(False, f"expected {kind.__name__}, got {type(e).__name__}: {e}")
    expect(False, f"expected {kind.__name__}, got a success")


raises(openai.BadRequestError, lambda: client.completions.create(model="tiny", prompt="x", temperature=7), "temperature")
raises(openai.BadRequestError, lambda: client.completions.create(model="tiny", prompt="x", n=99), "n")
raises(openai.BadRequestError, lambda: client.completions.create(model="tiny", prompt="x", stop=["s"] * 99), "stop")
raises(openai.BadRequestError, lambda: client.completions.create(model="tiny", prompt="x", logprobs=9), "logprobs")
raises(openai.BadRequestError,
       lambda: list(client.completions.create(model="tiny", prompt="x", echo=True, stream=True)), "echo")
raises(openai.BadRequestError, lambda: list(client.chat.completions.create(
    model="tiny", messages=[{"role": "assistant", "content": "x"}], stream=True)), "messages")
raises(openai.BadRequestError, lambda: client.completions.create(model="tiny", prompt=[[2, 10 ** 6]]), "prompt")
raises(openai.AuthenticationError, lambda: openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0)
       .completions.create(model="tiny", prompt="x"))
raises(openai.NotFoundError, lambda: client.embeddings.create(model="tiny", input="x"))
e = raises(openai.APIStatusError, lambda: client.completions.create(model="tiny", prompt="x" * (2 << 20)))
expect(e.status_code == 413, f"a 2 MiB prompt: HTTP {e.status_code}, not 413")
out(check="errors", kinds=["BadRequestError", "AuthenticationError", "NotFoundError", "APIStatusError 413"])
