"""Load test of zaya serve (run by bench/serve_load.sh with the pinned Python of
scripts/python-env.sh): CLIENTS concurrent clients of the official `openai`
package (AsyncOpenAI) send completions for SECONDS seconds over loopback, half
of them streamed; every response is checked (a choice with text, a finish
reason, usage that counts the tokens; a stream must end normally: the client
raises on an error event or status), and so is every text: requests repeat 40
(prompt, seed) pairs, and each pair must give the same text every time,
streamed or not, whatever it was batched with (half the prompts share a system
prompt of a few hundred tokens, so they run on shared prefix-cache pages).
Prints one JSON line: requests, failures, mismatched texts, tokens, throughput,
and p50/p99 of latency and time to first token (a whole response's first byte
is its last).

Usage: serve_load.py URL CLIENTS SECONDS MAX_TOKENS
"""
import asyncio
import json
import sys
import time

import openai

url, clients, seconds, max_tokens = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
PROMPTS = ["In the beginning", "And God said", "Blessed are", "The LORD is my shepherd", "And it came to pass"]
SYSTEM = ("And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of "
          "God moved upon the face of the waters. And God said, Let there be light: and there was light. And God saw "
          "the light, that it was good: and God divided the light from the darkness. And God called the light Day, and "
          "the darkness he called Night. And the evening and the morning were the first day. And God said, Let there "
          "be a firmament in the midst of the waters, and let it divide the waters from the waters. ")

client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
texts = {}  # (prompt, seed) key -> the first text it gave
stats = {"ok": 0, "failed": 0, "mismatched": 0, "tokens": 0}
latency, first_byte, errors = [], [], []
end = time.monotonic() + seconds
seq = 0


def same(key, text):
    if key not in texts:
        texts[key] = text
    elif texts[key] != text:
        stats["mismatched"] += 1
        if len(errors) < 5:
            errors.append(f"pair {key}: {text!r} != {texts[key]!r}")


async def one(request_id, stream):
    key = request_id % 40  # prompt key % 10 (with or without the system prompt), seed key % 8
    args = dict(model="zaya", prompt=(SYSTEM if key % 2 else "") + PROMPTS[key % 5], max_tokens=max_tokens,
                seed=key % 8, temperature=0.8)
    t0 = time.monotonic()
    if not stream:
        c = await client.completions.create(**args)
        if not isinstance(c.choices[0].text, str) or not c.choices[0].finish_reason:
            raise ValueError(f"bad body {c}")
        if not 1 <= c.usage.completion_tokens <= max_tokens:
            raise ValueError(f"bad usage {c.usage}")
        first_byte.append(time.monotonic() - t0)
        same(key, c.choices[0].text)
        return c.usage.completion_tokens
    text, finish, used, first = "", None, 0, True
    async for chunk in await client.completions.create(**args, stream=True, stream_options={"include_usage": True}):
        if first:
            first_byte.append(time.monotonic() - t0)
            first = False
        if chunk.usage:
            used = chunk.usage.completion_tokens
        if chunk.choices:
            finish = chunk.choices[0].finish_reason or finish
            text += chunk.choices[0].text or ""
    if not finish or used < 1:
        raise ValueError(f"incomplete stream: finish {finish}, usage {used}")
    same(key, text)
    return used


async def run_client(c):
    global seq
    while time.monotonic() < end:
        request_id = seq
        seq += 1
        t0 = time.monotonic()
        try:
            n = await one(request_id, c % 2 == 1)  # (not `+= await`: that reads the count before the await)
            stats["tokens"] += n
            latency.append(time.monotonic() - t0)
            stats["ok"] += 1
        except Exception as e:  # noqa: BLE001 - every failure is counted and a few are shown
            stats["failed"] += 1
            if len(errors) < 5:
                errors.append(f"{type(e).__name__}: {e}")


def pct(values, p):
    s = sorted(values)
    return 1000 * s[min(len(s) - 1, int(p * len(s)))] if s else 0


async def main():
    t0 = time.monotonic()
    await asyncio.gather(*(run_client(c) for c in range(clients)))
    wall = time.monotonic() - t0
    print(json.dumps({"clients": clients, "seconds": wall, "requests": stats["ok"] + stats["failed"], **stats,
                      "requests_per_second": stats["ok"] / wall, "tokens_per_second": stats["tokens"] / wall,
                      "latency_ms": {"p50": pct(latency, 0.5), "p99": pct(latency, 0.99)},
                      "first_byte_ms": {"p50": pct(first_byte, 0.5), "p99": pct(first_byte, 0.99)},
                      "client": f"openai {openai.__version__} (Python)", "errors": errors}), flush=True)
    return 1 if stats["failed"] or stats["mismatched"] else 0


sys.exit(asyncio.run(main()))
