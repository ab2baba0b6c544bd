"""The official `openai` client against zaya serve with LoRA adapters "a" and
"b" beside the base "run" (run by tests/e2e/serve_lora.sh, which made the
references with zaya generate --lora DIR). Exits non-zero on the first
difference.

Usage: serve_lora.py BASE_URL API_KEY WANT_JSONL ADAPTER_A ADAPTER_B
"""
import json
import sys
import threading

import openai

base_url, api_key, want_path, adapter_a, adapter_b = sys.argv[1:6]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300)
want = [json.loads(line) for line in open(want_path)]


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def greedy(model, prompt, **kw):
    r = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0, **kw)
    if r.model != model:
        fail(f"the response to model {model!r} names {r.model!r}")
    return r


# /v1/models: the base, then each adapter with its directory and parent.
models = {m.id: m for m in client.models.list().data}
if sorted(models) != ["a", "b", "run"]:
    fail(f"/v1/models lists {sorted(models)}")
if models["a"].model_extra.get("root") != adapter_a or models["b"].model_extra.get("parent") != "run":
    fail(f"/v1/models adapter cards: {models['a']}, {models['b']}")
print("ok: /v1/models lists run, a, b")

# Each model name alone: zaya generate --lora DIR's greedy text.
for w in want:
    got = greedy(w["model"], w["prompt"]).choices[0].text
    if got != w["text"]:
        fail(f"model {w['model']} prompt {w['prompt']!r}: {got!r}, zaya generate --lora gives {w['text']!r}")
print(f"ok: {len(want)} greedy completions equal zaya generate --lora DIR's, one model at a time")
# The adapters change the model (the check above would be vacuous otherwise): the first token's log-probability.
first = {m: greedy(m, want[0]["prompt"], logprobs=1).choices[0].logprobs.token_logprobs[0] for m in ("run", "a", "b")}
if len(set(first.values())) != 3:
    fail(f"the adapters do not change the first token's log-probability: {first}")
print(f"ok: the first token's log-probability per model: {first}")

# All of them at once, twice over (mixed batches: --batch 4 holds several models in one step); chat too.
results = {}


def run(i, w):
    try:
        results[i] = greedy(w["model"], w["prompt"]).choices[0].text
    except Exception as e:  # noqa: BLE001 (reported below)
        results[i] = e


threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate(want + want)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for i, w in enumerate(want + want):
    if results[i] != w["text"]:
        fail(f"concurrent: model {w['model']} prompt {w['prompt']!r}: {results[i]!r}, want {w['text']!r}")
print(f"ok: {len(threads)} concurrent requests over three models, each its own model's text")
chat = {m: client.chat.completions.create(model=m, messages=[{"role": "user", "content": "Who made the earth?"}],
                                           max_tokens=8, temperature=0).choices[0].message.content
        for m in ("run", "a", "b")}
print(f"ok: chat on each model: {chat}")

# Unknown models: the client's NotFoundError, naming the field and the served names.
try:
    greedy("c", "x")
    fail("an unknown model was served")
except openai.NotFoundError as e:
    if e.body.get("param") != "model" or e.body.get("code") != "model_not_found" or '"a"' not in e.body["message"]:
        fail(f"the 404 for an unknown model: {e.body}")
print("ok: an unknown model: 404 naming 'model' and the served names")

# Run-time loading: "c" is a's directory under another name, so it gives a's text; then it is unloaded.
admin = client.with_options(base_url=base_url.removesuffix("/v1"))
admin.post("/v1/load_lora_adapter", body={"lora_name": "c", "lora_path": adapter_a}, cast_to=object)
text_a = next(w["text"] for w in want if w["model"] == "a")
if greedy("c", want[0]["prompt"]).choices[0].text != text_a:
    fail("the adapter loaded at run time does not give its directory's text")
if "c" not in [m.id for m in client.models.list().data]:
    fail("/v1/models does not list the adapter loaded at run time")
# Unload while a request streams on it: the request finishes with the adapter, unchanged; new ones get 404.
stream = client.completions.create(model="c", prompt=want[0]["prompt"], max_tokens=12, temperature=0, stream=True)
pieces = [next(iter(stream)).choices[0].text]
admin.post("/v1/unload_lora_adapter", body={"lora_name": "c"}, cast_to=object)
pieces += [chunk.choices[0].text for chunk in stream if chunk.choices]
if "".join(pieces) != text_a:
    fail(f"the request streaming through an unload gave {''.join(pieces)!r}, want {text_a!r}")
try:
    greedy("c", "x")
    fail("an unloaded adapter was served")
except openai.NotFoundError:
    pass
if "c" in [m.id for m in client.models.list().data]:
    fail("/v1/models lists an unloaded adapter")
print("ok: load at run time, unload while a request streams on it (it finishes unchanged), then 404")
