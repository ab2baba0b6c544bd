"""The official `openai` Python client against zaya serve (run by tests/e2e/serve.sh
with the pinned environment of scripts/python-env.sh): completions and chat, whole
and streamed, streamed usage, and a bad request. Prints one JSON line per check for
the shell test to compare; exits non-zero on any unexpected error.

Usage: serve_openai.py BASE_URL API_KEY
"""
import json
import sys

import openai

base_url, api_key = sys.argv[1], sys.argv[2]
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
