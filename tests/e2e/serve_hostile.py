"""A hostile client against zaya serve, loopback only (run by tests/e2e/serve_hostile.sh).

Replays every finding of the December 2026 red-team of the server (docs/serve.md,
"Security and limits", lists them) and the classes around each: nesting depth, body
size and encodings, methods, headers, conflicting lengths, slow clients, bounded
floods, signals. Every case checks the answer (a 4xx with a sentence in OpenAI's
error shape, or the documented behaviour) and then that the server still answers a
normal request with the same greedy text as before. Every loop has a fixed count,
every socket a timeout, and each server this script starts is killed at the end.

Usage: serve_hostile.py ZAYA MODEL_DIR WORK_DIR ADAPTER_DIR
(ADAPTER_DIR: a PEFT LoRA adapter of MODEL_DIR, for the adapter cases)
Prints "ok: CASE" per case; exits 1 at the first failure, saying what was wrong.
"""
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

ZAYA, MODEL, WORK, ADAPTER = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
RUN_NAME = os.path.basename(os.path.dirname(os.path.abspath(MODEL)))  # RUN/final -> RUN
servers = []


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()
    sys.exit(1)


def ok(message):
    print(f"ok: {message}", flush=True)


class Server:
    """One zaya serve process on a free loopback port; its stderr goes to a file."""

    def __init__(self, *flags, env=None):
        self.log = os.path.join(WORK, f"serve{len(servers)}.log")
        self.proc = subprocess.Popen([ZAYA, "serve", "--model", MODEL, "--port", "0", "--threads", "1", *flags],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "w"), env=env)
        servers.append(self)
        self.port = None
        for _ in range(300):
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", self.stderr())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                fail(f"zaya serve {' '.join(flags)} exited {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.1)
        if self.port is None:
            fail(f"zaya serve {' '.join(flags)} did not say its port in 30 s: {self.stderr()}")

    def stderr(self):
        with open(self.log) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def raw(port, data, timeout=20.0, read=True):
    """Sends bytes, returns (status, headers dict, body) of the first response, or
    (None, {}, b"") when the server closed without one."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading everything
        if not read:
            return None, {}, b""
        return read_response(s)


def read_response(s):
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                return None, {}, buf
            buf += chunk
    except ConnectionResetError:
        return None, {}, buf
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    try:
        if "content-length" in headers:
            while len(body) < int(headers["content-length"]):
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while not body.endswith(b"0\r\n\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
            body = dechunk(body)
    except (ConnectionResetError, socket.timeout):
        pass
    return status, headers, body


def dechunk(body):
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def request(method, path, body=b"", headers=None, content_type="application/json"):
    h = {"Host": "127.0.0.1", "Connection": "close"}
    if content_type:
        h["Content-Type"] = content_type
    if body or method == "POST":
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode("latin-1") + body


def post(path, obj_or_bytes, **kw):
    body = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode()
    return request("POST", path, body, **kw)


def error_message(status, body, case):
    """The sentence of an OpenAI-shaped error body; fails on anything else."""
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        fail(f"{case}: HTTP {status} without an OpenAI error body: {body[:300]!r}")
    if re.search(r"HTTP status \d+$", message) or len(message.split()) < 4:
        fail(f"{case}: HTTP {status} says no sentence a person can act on: {message!r}")
    if "[json.exception" in message:
        fail(f"{case}: the JSON library's prefix leaks into the message: {message!r}")
    if len(message) > 2000:
        fail(f"{case}: a {len(message)}-character message (values must be cut short)")
    return message


def expect(server, case, data, statuses, pattern=None, timeout=20.0):
    """The answer's status is in `statuses`, with a sentence matching `pattern`;
    then the server must still serve the reference completion."""
    status, headers, body = raw(server.port, data, timeout)
    if status not in statuses:
        fail(f"{case}: expected HTTP {sorted(statuses)}, got {status}: {body[:300]!r}")
    message = error_message(status, body, case) if status >= 400 else ""
    if pattern and not re.search(pattern, message, re.I):
        fail(f"{case}: the {status} message lacks /{pattern}/: {message!r}")
    still_serving(server, case)
    ok(f"{case} -> {status}: {message[:110]}")
    return status, headers, body


GREEDY = {"prompt": "And God said", "max_tokens": 6, "temperature": 0}
reference = None


def completion(server, extra=None, port=None):
    status, _, body = raw(port or server.port, post("/v1/completions", {**GREEDY, **(extra or {})}))
    if status != 200:
        fail(f"a normal completion got HTTP {status}: {body[:300]!r}")
    return json.loads(body)["choices"][0]["text"]


def still_serving(server, case):
    if server.proc.poll() is not None:
        fail(f"{case}: the server died (exit {server.proc.returncode}): {server.stderr()[-2000:]}")
    text = completion(server)
    if text != reference:
        fail(f"{case}: after it the reference completion is {text!r}, was {reference!r}")


def nested(depth, leaf="1"):
    return "[" * depth + leaf + "]" * depth


def drain_check(grace, requests, max_tokens, want_exit):
    """SIGTERM with `requests` requests in flight (even ones whole, odd ones streamed,
    2 sequences each on a batch of 2): a request after the signal is refused, each
    one in flight either finishes normally or is reported as cut (whole: an error
    body with code server_shutdown, its 200 already sent with the first heartbeat;
    streamed: an error event and no [DONE]), and the exit code says which happened."""
    drain = Server("--batch", "2", "--shutdown-grace", str(grace))
    results = {}

    def run(i):
        body = {"prompt": "And", "max_tokens": max_tokens, "temperature": 1, "stop": [], "seed": i, "n": 2,
                "stream": i % 2 == 1}
        try:
            results[i] = raw(drain.port, post("/v1/completions", body), timeout=120)
        except OSError as e:
            results[i] = (repr(e), {}, b"")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(requests)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # every request sent and admitted
    drain.proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    try:
        late = raw(drain.port, post("/v1/completions", GREEDY), timeout=10)[0]
    except OSError:
        late = "refused"
    for t in threads:
        t.join(120)
    code = drain.proc.wait(120)
    if late not in (503, "refused"):
        fail(f"M2: a request 50 ms after SIGTERM got {late}, not 503 or a refused connection")
    cut = {"whole": 0, "stream": 0}
    for i, (status, headers, body) in sorted(results.items()):
        kind = "stream" if i % 2 else "whole"
        if status != 200:
            fail(f"M2: {kind} request {i} got {status}: {body[-300:]!r}")
        if kind == "stream":
            events = [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]
            errors = [e for e in events if e != "[DONE]" and "error" in json.loads(e)]
            if errors:
                if events[-1] == "[DONE]":
                    fail(f"M2: a stream cut by the shutdown ends with [DONE]: {body[-300:]!r}")
                cut[kind] += 1
            elif events[-1] != "[DONE]" or sum('"finish_reason":null' not in e for e in events[:-1]) != 2:
                fail(f"M2: a stream neither finished nor reported as cut: {body[-300:]!r}")
        else:
            reply = json.loads(body)  # the heartbeat newlines before it are JSON whitespace
            if "error" in reply:
                if reply["error"]["code"] != "server_shutdown":
                    fail(f"M2: a whole response cut by the shutdown: {reply}")
                cut[kind] += 1
            elif any(c["finish_reason"] not in ("stop", "length") for c in reply["choices"]):
                fail(f"M2: a whole response neither finished nor reported as cut: {reply}")
    if want_exit == 0 and (cut["whole"] or cut["stream"]):
        fail(f"M2: --shutdown-grace {grace} cut short requests {cut}")
    if want_exit != 0 and not (cut["whole"] and cut["stream"]):
        fail(f"M2: --shutdown-grace {grace} finished every request ({cut}): nothing exercised a cut")
    if code != want_exit:
        fail(f"M2: the server exited {code}; documented: 0 when every request finished, 3 when some were cut")
    ok(f"M2 SIGTERM, --shutdown-grace {grace}: late request {late}; cut {cut}, the rest finished; exit code {code}")


def main():
    global reference
    s = Server("--batch", "2", "--max-queue", "2", "--max-n", "16")
    reference = completion(s)
    ok(f"server on port {s.port}; greedy reference {reference!r}")

    # ---- H1: nesting, in every field the report found and in the body itself ----
    deep = 100_000
    for field, value in [("stop", nested(deep, '"x"')), ("max_tokens", nested(deep)),
                         ("logit_bias", '{"1":' + nested(deep) + "}"), ("user", nested(deep))]:
        body = ('{"prompt":"a","' + field + '":' + value + "}").encode()
        expect(s, f"H1 {field} nested {deep} deep", post("/v1/completions", body), {400}, r"deep|nest")
    body = ('{"messages":[{"role":"user","content":' + nested(deep, '"x"') + "}]}").encode()
    expect(s, "H1 messages[0].content nested", post("/v1/chat/completions", body), {400}, r"deep|nest")
    body = ('{"messages":[{"role":"user","content":"x"}],"response_format":' + '{"type":' * deep + '"x"' +
            "}" * deep + "}").encode()
    expect(s, "H1 response_format nested", post("/v1/chat/completions", body), {400}, r"deep|nest")
    expect(s, "H1 whole body nested", post("/v1/completions", nested(deep).encode()), {400})
    # Long values are cut short in messages (error_message checks the length).
    expect(s, "H1 a 500 KB wrong-typed value", post("/v1/completions", {"prompt": "a", "max_tokens": "9" * 500_000}),
           {400}, r"max_tokens")

    # ---- H2: body size, whatever the framing ----
    big = b'{"prompt":"x","max_tokens":1}' + b" " * (2 << 20)
    expect(s, "H2 2 MB with Content-Length", post("/v1/completions", big), {413}, r"max-body-bytes")
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 65536]), big[i:i + 65536]) for i in range(0, len(big), 65536))
    chunked = request("POST", "/v1/completions", headers={"Transfer-Encoding": "chunked"})
    chunked = chunked.replace(b"Content-Length: 0\r\n", b"") + chunks + b"0\r\n\r\n"
    expect(s, "H2 2 MB chunked", chunked, {411, 413}, r"max-body-bytes|length|chunked")
    small_chunked = request("POST", "/v1/completions", headers={"Transfer-Encoding": "chunked"})
    small_chunked = small_chunked.replace(b"Content-Length: 0\r\n", b"") + b"zz\r\nab\r\n0\r\n\r\n"
    expect(s, "H2 a bad chunk size", small_chunked, {400, 411, 413})

    # ---- H3: /metrics stays well formed and bounded ----
    raw(s.port, request("GET", "/x%22%7D%201%0Afake_metric%2042%0A%23"))
    raw(s.port, request("GET", "/%00"))
    status, _, before = raw(s.port, request("GET", "/metrics"))
    for i in range(300):
        raw(s.port, request("GET", f"/unique-{i}-" + "p" * 1000))
    status, _, after = raw(s.port, request("GET", "/metrics"))
    text = after.decode()
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? \S+$')
    for line in text.splitlines():
        if line and not line.startswith("#") and not sample.match(line):
            fail(f"H3: /metrics has a malformed line: {line[:200]!r}")
    if re.search(r"^fake_metric", text, re.M) or "unique-" in text or "\x00" in text:
        fail("H3: a request path reached /metrics as a series")
    if len(after) > len(before) + 2000:
        fail(f"H3: 300 unknown paths grew /metrics from {len(before)} to {len(after)} bytes")
    still_serving(s, "H3")
    ok(f"H3 /metrics well formed, paths not labels, {len(before)} -> {len(after)} bytes after 300 unknown paths")

    # ---- L1-L3, L6: methods, request lines, headers, lengths, content types ----
    expect(s, "L1 TRACE /", b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", {405, 501})
    expect(s, "L1 FOO /v1/completions", b"FOO /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", {400, 405, 501})
    expect(s, "L1 DELETE /v1/models", b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", {404, 405, 501})
    expect(s, "L1 a 20 KB URL", request("GET", "/" + "a" * 20_000), {414, 400})
    expect(s, "L1 a 100 KB header", request("GET", "/health", headers={"X-Big": "b" * 100_000}), {431, 400})
    status, _, _ = raw(s.port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    still_serving(s, "L1 HTTP/2 preface")
    ok(f"L1 HTTP/2 preface -> {status}")
    status, _, _ = raw(s.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64))
    still_serving(s, "L1 TLS hello")
    ok(f"L1 TLS client hello -> {status}")
    two_lengths = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 16\r\nContent-Length: 2\r\n\r\n{}")
    expect(s, "L2 two different Content-Lengths", two_lengths, {400})
    both = request("POST", "/v1/completions", b"", headers={"Transfer-Encoding": "chunked"})
    both = both.replace(b"Content-Length: 0", b"Content-Length: 5") + b"0\r\n\r\n"
    expect(s, "L2 Content-Length with Transfer-Encoding", both, {400})
    huge = request("POST", "/v1/completions", headers={"Content-Length": "1000000000000000"})
    huge = huge.replace(b"Content-Length: 0\r\n", b"") + b"0123456789"
    expect(s, "L3 Content-Length 10^15", huge, {413}, timeout=10)
    negative = request("POST", "/v1/completions", headers={"Content-Length": "-1"})
    expect(s, "L3 Content-Length -1", negative.replace(b"Content-Length: 0\r\n", b"") + b"0123456789", {400},
           timeout=10)
    for ctype in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]:
        expect(s, f"L6 Content-Type {ctype}", post("/v1/completions", GREEDY, content_type=ctype), {415},
               r"application/json")
    expect(s, "L6 OPTIONS", request("OPTIONS", "/v1/completions", content_type=None), {405, 204})

    # ---- requests the API itself refuses (M5's shapes are in serve.sh) ----
    expect(s, "L4 n above --batch + --max-queue", post("/v1/completions", {**GREEDY, "n": 5}), {400}, r"\bn\b")
    expect(s, "L10 a tool-call history",
           post("/v1/chat/completions", {"messages": [
               {"role": "user", "content": "x"},
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "1", "content": "y"}]}), {400}, r"tool")
    expect(s, "L10 legacy functions",
           post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                         "functions": [{"name": "f", "parameters": {}}]}), {400}, r"function")
    expect(s, "L10 a developer message",
           post("/v1/chat/completions", {"messages": [{"role": "developer", "content": "Be brief."},
                                                      {"role": "user", "content": "x"}], "max_tokens": 2}), {200})
    expect(s, "L11 malformed JSON", post("/v1/completions", b'{"prompt": '), {400}, r"JSON")
    status, _, body = raw(s.port, request("GET", "/v1/models"))
    if json.loads(body)["data"][0]["id"] != RUN_NAME:
        fail(f"L12: the model id is {json.loads(body)['data'][0]['id']!r}, not the run's name {RUN_NAME!r}")
    ok(f"L12 the model id is the run's name: {RUN_NAME}")

    # ---- T: the tokenizer endpoints (lm-evaluation-harness's remote tokenizer) parse input too ----
    for field, value in [("prompt", nested(deep, '"x"')), ("add_special_tokens", nested(deep))]:
        body = ('{"prompt":"a","' + field + '":' + value + "}").encode()
        expect(s, f"T1 /tokenize {field} nested {deep} deep", post("/tokenize", body), {400}, r"deep|nest")
    expect(s, "T1 /detokenize tokens nested", post("/detokenize", ('{"tokens":' + nested(deep) + "}").encode()),
           {400}, r"deep|nest")
    expect(s, "T2 /tokenize a 300 KB wrong-typed prompt", post("/tokenize", {"prompt": [9] * 100_000}), {400},
           r"prompt")
    expect(s, "T2 /detokenize an id past the vocabulary", post("/detokenize", {"tokens": [1, 2, 2 ** 31 - 1]}), {400},
           r"tokens\[2\].*vocabulary")
    expect(s, "T2 /detokenize a negative id", post("/detokenize", {"tokens": [-1]}), {400}, r"token id")
    # The special-token matcher's worst case: a body of "<", each one starts "<bos>", "<eos>", ... (linear time).
    t0 = time.time()
    expect(s, "T3 /tokenize 900 KB of '<'", post("/tokenize", {"prompt": "<" * 900_000}), {200}, timeout=60)
    expect(s, "T3 /tokenize 900 KB of '<bo'", post("/tokenize", {"prompt": "<bo" * 300_000}), {200}, timeout=60)
    if time.time() - t0 > 30:
        fail(f"T3: two 900 KB /tokenize bodies took {time.time() - t0:.1f} s")
    expect(s, "T3 /detokenize 200k ids", post("/detokenize", {"tokens": [5] * 200_000}), {200}, timeout=60)
    expect(s, "T4 /tokenize over --max-body-bytes", post("/tokenize", {"prompt": "x" * (2 << 20)}), {413},
           r"max-body-bytes")

    # ---- M3: a tiny temperature is greedy ----
    for t in [1e-6, 1e-8, 1e-9, 1e-10, 1e-12, 1e-30, 1e-40, 1e-300]:
        text = completion(s, {"temperature": t, "seed": 1})
        if text != reference:
            fail(f"M3: temperature {t} gives {text!r}, greedy gives {reference!r}")
    ok("M3 temperatures 1e-6 .. 1e-300 give the greedy text")

    # ---- L9: 64 simultaneous connections are all answered ----
    answers = []

    def health():
        try:
            answers.append(raw(s.port, request("GET", "/health"), timeout=20)[0])
        except OSError as e:
            answers.append(repr(e))

    threads = [threading.Thread(target=health) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if answers.count(200) != 64:
        fail(f"L9: 64 simultaneous /health: {answers}")
    ok("L9 64 simultaneous connections all answered 200")

    # ---- a bounded flood of random bytes: 4xx or a close each, the server lives ----
    rng = random.Random(1)
    for i in range(200):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        if i % 2:
            junk = b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(junk) + junk
        try:
            with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
                c.sendall(junk)
                c.shutdown(socket.SHUT_WR)
                status, _, _ = read_response(c)
        except OSError:
            status = None
        if status is not None and not 400 <= status < 500:
            fail(f"flood: random bytes #{i} got HTTP {status}: {junk[:80]!r}")
    still_serving(s, "flood")
    ok("200 random requests: each a 4xx or a close; the server still serves")

    # ---- M4: slow clients are cut at the read deadline ----
    slow = Server("--read-deadline", "2")
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", slow.port), timeout=20) as c:
        status = None
        for byte in post("/v1/completions", GREEDY):
            try:
                c.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
            if time.monotonic() - start > 15:
                break
        status, _, body = read_response(c)
    if status != 408:
        fail(f"M4: a request sent one byte per 100 ms got {status}, not 408, after {time.monotonic() - start:.1f} s")
    error_message(status, body, "M4")
    still_serving(slow, "M4")
    ok(f"M4 one byte per 100 ms: 408 after {time.monotonic() - start:.1f} s (--read-deadline 2)")

    # ---- L5: 429 carries Retry-After ----
    busy = Server("--max-concurrent", "1")
    long_request = socket.create_connection(("127.0.0.1", busy.port), timeout=30)
    # Greedy: this prompt's greedy text repeats ' said' (the reference above) and never ends early, where a
    # sampled one could draw the end of text in its first tokens and free the place (a CI run saw a 200).
    long_request.sendall(post("/v1/completions", {"prompt": GREEDY["prompt"], "max_tokens": 1000, "stream": True,
                                                  "temperature": 0, "stop": []}))
    long_request.recv(1)  # its head has started: it holds the one place
    status, headers, body = raw(busy.port, post("/v1/completions", GREEDY))
    long_request.close()
    if status != 429 or "retry-after" not in headers:
        fail(f"L5: a second request at --max-concurrent 1 got {status} with headers {headers}")
    error_message(status, body, "L5")
    ok(f"L5 429 with Retry-After: {headers['retry-after']}")

    # ---- M1, L7, L8: startup flags ----
    second = subprocess.run([ZAYA, "serve", "--model", MODEL, "--port", str(s.port), "--threads", "1"],
                            capture_output=True, text=True, timeout=60)
    if second.returncode == 0 or "in use" not in second.stderr:
        fail(f"M1: a second server on port {s.port} exited {second.returncode}: {second.stderr[-500:]}")
    ok(f"M1 a second server on the same port: exit {second.returncode}: {second.stderr.strip()[-120:]}")
    for args, env in [(["--api-key", ""], None), ([], {**os.environ, "ZAYA_API_KEY": ""})]:
        r = subprocess.run([ZAYA, "serve", "--model", MODEL, "--port", "0", *args], capture_output=True, text=True,
                           timeout=60, env=env)
        if r.returncode == 0 or "empty" not in r.stderr:
            fail(f"L7: an empty key ({args or 'ZAYA_API_KEY='}) exited {r.returncode}: {r.stderr[-500:]}")
        ok(f"L7 an empty key is refused: {r.stderr.strip()[-120:]}")
    keyed = Server(env={**os.environ, "ZAYA_API_KEY": "k3y"})
    for auth, want in [("Bearer k3y", 200), ("bearer k3y", 200), ("BEARER k3y", 200), ("Bearer k3", 401),
                       ("Basic k3y", 401)]:
        status, _, body = raw(keyed.port, post("/v1/completions", GREEDY, headers={"Authorization": auth}))
        if status != want:
            fail(f"L7: Authorization {auth!r} got {status}, want {want}: {body[:200]!r}")
    status, _, body = raw(keyed.port, request("GET", "/nope-unauthenticated"))
    _, _, metrics = raw(keyed.port, request("GET", "/metrics"))
    if b"nope-unauthenticated" in metrics:
        fail("H3: an unauthenticated path reached /metrics")
    ok("L7 the Bearer scheme is case-insensitive; wrong keys get 401")
    capped = Server("--max-context", "100000")
    banner = [line for line in capped.stderr().splitlines() if line.startswith("zaya serve: model")]
    context = re.search(r"context (\d+)", banner[0] if banner else "")
    if not context or int(context.group(1)) >= 100000 or "max_position_embeddings" not in capped.stderr():
        fail(f"L8: --max-context 100000 on a shorter model is neither capped with a note nor refused: {capped.stderr()}")
    ok(f"L8 --max-context above the model is capped with a note: context {context.group(1)}")
    if "the model was trained on sequences of 64 tokens" not in capped.stderr():
        fail(f"M6: no note that the context passes the training length (64): {capped.stderr()}")
    ok("M6 the server notes that its context passes the training length")
    for server in (slow, busy, keyed, capped):
        server.stop()

    # ---- X: tools, tool calls and reasoning (--chat-format zaya): every bad part a 400 naming it ----
    tools_server = Server("--chat-format", "zaya", "--max-tools", "4")
    user = [{"role": "user", "content": "x"}]

    def fn(name, **rest):
        return {"type": "function", "function": {"name": name, **rest}}

    def expect_param(server, case, body, param, pattern=None):
        _, _, answer = expect(server, case, post("/v1/chat/completions", body), {400}, pattern)
        got = json.loads(answer)["error"]["param"]
        if got != param:
            fail(f"{case}: param {got!r}, want {param!r}")

    tool_cases = [
        ("X1 tools not a list", {"tools": {"f": 1}}, "tools"),
        ("X1 five tools over --max-tools 4", {"tools": [fn(f"f{i}") for i in range(5)]}, "tools"),
        ("X1 20k tools", {"tools": [fn("f")] * 20_000}, "tools"),
        ("X2 a tool without function", {"tools": [{"type": "function"}]}, "tools[0]"),
        ("X2 a tool of type retrieval", {"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools[0].type"),
        ("X2 a name with a space", {"tools": [fn("get weather")]}, "tools[0].function.name"),
        ("X2 a name with markup", {"tools": [fn("f><parameter=x")]}, "tools[0].function.name"),
        ("X2 a 10 KB name", {"tools": [fn("f" * 10_000)]}, "tools[0].function.name"),
        ("X2 a name twice", {"tools": [fn("f"), fn("f")]}, "tools[1].function.name"),
        ("X3 parameters not a schema", {"tools": [fn("f", parameters=[1])]}, "tools[0].function.parameters"),
        ("X3 parameters of type string", {"tools": [fn("f", parameters={"type": "string"})]},
         "tools[0].function.parameters.type"),
        ("X3 a property of an unknown type", {"tools": [fn("f", parameters={"properties": {"x": {"type": "date"}}})]},
         "tools[0].function.parameters.properties.x.type"),
        ("X3 a property that is not a schema", {"tools": [fn("f", parameters={"properties": {"x": 3}})]},
         "tools[0].function.parameters.properties.x"),
        ("X3 a property name with markup", {"tools": [fn("f", parameters={"properties": {"a</parameter>": {}}})]},
         "tools[0].function.parameters.properties"),
        ("X3 required names no property", {"tools": [fn("f", parameters={"properties": {}, "required": ["y"]})]},
         "tools[0].function.parameters.required"),
        ("X4 tool_choice of an unknown function", {"tools": [fn("f")], "tool_choice": {
            "type": "function", "function": {"name": "g"}}}, "tool_choice.function.name"),
        ("X4 tool_choice required without tools", {"tool_choice": "required"}, "tool_choice"),
        ("X4 enable_thinking not a boolean", {"chat_template_kwargs": {"enable_thinking": "yes"}},
         "chat_template_kwargs.enable_thinking"),
    ]
    for case, extra, param in tool_cases:
        expect_param(tools_server, case, {"messages": user, **extra}, param)
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
    history_cases = [
        ("X5 arguments that are not JSON", [{"role": "assistant", "content": None, "tool_calls": [call]}],
         "messages[1].tool_calls[0].function.arguments"),
        ("X5 arguments nested 100k deep", [{"role": "assistant", "content": None, "tool_calls": [
            {**call, "function": {"name": "f", "arguments": nested(100_000)}}]}],
         "messages[1].tool_calls[0].function.arguments"),
        ("X5 a tool result with no call before it", [{"role": "tool", "tool_call_id": "c", "content": "r"}],
         "messages"),
        ("X5 tool_calls on a user message", [{"role": "user", "content": "y", "tool_calls": [call]}],
         "messages[1].tool_calls"),
    ]
    for case, more, param in history_cases:
        expect_param(tools_server, case, {"messages": user + more}, param)
    body = ('{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f",'
            '"parameters":' + '{"a":' * deep + "1" + "}" * deep + "}}]}").encode()
    expect(tools_server, "X6 a tool schema nested 100k deep", post("/v1/chat/completions", body), {400}, r"deep|nest")
    expect_param(s, "X7 tools on a gemma3 model", {"messages": user, "tools": [fn("f")]}, "tools", r"--chat-format")
    expect(tools_server, "X8 a good tool request", post("/v1/chat/completions", {
        "messages": user, "tools": [fn("f", parameters={"type": "object", "properties": {"x": {"type": "integer"}}})],
        "tool_choice": "required", "max_tokens": 4}), {200})
    # A tool list beside response_format: refused (one or the other).
    expect_param(tools_server, "J7 response_format beside tools", {
        "messages": user, "tools": [fn("f")], "response_format": {"type": "json_object"}}, "response_format")
    tools_server.stop()

    # ---- J: response_format (constrained decoding): every bad part a 400 naming it ----
    def schema(sch):
        return {"type": "json_schema", "json_schema": {"name": "x", "schema": sch}}

    deep_schema = {"type": "string"}
    for _ in range(40):
        deep_schema = {"type": "array", "items": deep_schema}
    json_cases = [
        ("J1 response_format not an object", "json", "response_format"),
        ("J1 response_format without type", {}, "response_format.type"),
        ("J1 an unknown response_format type", {"type": "xml"}, "response_format.type"),
        ("J2 json_schema without json_schema", {"type": "json_schema"}, "response_format.json_schema"),
        ("J2 json_schema not an object", {"type": "json_schema", "json_schema": [1]}, "response_format.json_schema"),
        ("J2 json_schema without schema", {"type": "json_schema", "json_schema": {"name": "x"}},
         "response_format.json_schema.schema"),
        ("J2 strict not a boolean", {"type": "json_schema", "json_schema": {"name": "x", "schema": {},
                                                                            "strict": "yes"}},
         "response_format.json_schema.strict"),
        ("J3 a schema that is a list", schema([1]), "response_format.json_schema.schema"),
        ("J3 an unknown type name", schema({"type": "object", "properties": {"x": {"type": "date"}}}),
         "response_format.json_schema.schema.properties.x.type"),
        ("J3 a type that is a number", schema({"type": 7}), "response_format.json_schema.schema.type"),
        ("J4 pattern (unsupported)", schema({"type": "string", "pattern": "a+"}),
         "response_format.json_schema.schema.pattern"),
        ("J4 minimum (unsupported)", schema({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}),
         "response_format.json_schema.schema.properties.n.minimum"),
        ("J4 additionalProperties as a schema", schema({"type": "object", "additionalProperties": {"type": "string"}}),
         "response_format.json_schema.schema.additionalProperties"),
        ("J4 required names no property", schema({"type": "object", "properties": {}, "required": ["y"]}),
         "response_format.json_schema.schema.required[0]"),
        ("J4 maxItems negative", schema({"type": "array", "maxItems": -1}),
         "response_format.json_schema.schema.maxItems"),
        ("J4 a $ref that does not resolve", schema({"$ref": "#/$defs/nope"}), "response_format.json_schema.schema.$ref"),
        ("J5 a schema 41 levels deep", schema(deep_schema), "response_format.json_schema.schema" + ".items" * 33),
        ("J5 an enum of 10k values", schema({"enum": list(range(10_000))}), "response_format.json_schema.schema.enum"),
        ("J5 100 properties", schema({"type": "object", "properties": {f"p{i}": {} for i in range(100)}}),
         "response_format.json_schema.schema.properties"),
        ("J5 5000 alternatives", schema({"anyOf": [{"type": "string"}] * 5000}),
         "response_format.json_schema.schema.anyOf["),  # (a prefix: the alternative where the node limit is met)
    ]
    for case, fmt, param in json_cases:
        _, _, answer = expect(s, case, post("/v1/chat/completions", {"messages": user, "response_format": fmt}), {400})
        got = json.loads(answer)["error"]["param"]
        if got != param and not (param.endswith("[") and got.startswith(param)):
            fail(f"{case}: param {got!r}, want {param!r}")
    _, _, answer = expect(s, "J6 completions with a bad schema", post("/v1/completions", {
        "prompt": "x", "response_format": schema({"type": "object", "properties": {"x": {"type": "nope"}}})}), {400})
    if json.loads(answer)["error"]["param"] != "response_format.json_schema.schema.properties.x.type":
        fail(f"J6: param {json.loads(answer)['error']['param']!r}")
    _, _, answer = expect(s, "J8 a good json_schema request", post("/v1/chat/completions", {
        "messages": user, "response_format": schema({"type": "object", "properties": {"a": {"enum": [1, 2]}},
                                                     "required": ["a"]}), "max_tokens": 40}), {200})
    text = json.loads(answer)["choices"][0]["message"]["content"]
    if json.loads(answer)["choices"][0]["finish_reason"] == "stop" and json.loads(text)["a"] not in (1, 2):
        fail(f"J8: the answer {text!r} does not validate")

    # ---- A: LoRA adapters (--lora NAME=DIR, vLLM's admin endpoints): 400/401/403/404 naming the field ----
    lora_cases(s)

    # ---- M2: SIGTERM drains, then cuts what the grace did not finish ----
    drain_check(grace=30, requests=2, max_tokens=300, want_exit=0)
    drain_check(grace=0, requests=12, max_tokens=1000, want_exit=3)

    s.stop()
    print("serve_hostile: every finding replayed; the server answered each and kept serving")


def lora_cases(s):
    def expect_field(server, case, data, status, param, pattern=None):
        _, _, answer = expect(server, case, data, {status}, pattern)
        got = json.loads(answer)["error"]["param"]
        if got != param:
            fail(f"{case}: param {got!r}, want {param!r}")

    def load(name, path):
        return post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})

    # An adapter copy with one thing wrong in its adapter_config.json.
    def broken_copy(tag, **change):
        d = os.path.join(WORK, f"adapter-{tag}")
        subprocess.run(["cp", "-r", ADAPTER, d], check=True)
        config_path = os.path.join(d, "adapter_config.json")
        with open(config_path) as f:
            config = json.load(f)
        config.update(change)
        with open(config_path, "w") as f:
            json.dump(config, f)
        return d

    # Off unless asked for: 403 naming the flag.
    expect(s, "A1 the admin endpoint without --lora-admin", load("x", ADAPTER), {403}, r"--lora-admin")
    # --lora-admin on a server with no API key is refused at start.
    r = subprocess.run([ZAYA, "serve", "--model", MODEL, "--port", "0", "--lora-admin"], capture_output=True,
                       text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "ZAYA_API_KEY"})
    if r.returncode != 2 or "--api-key" not in r.stderr:
        fail(f"A2 --lora-admin without a key: exit {r.returncode}, {r.stderr[-300:]!r}")
    ok("A2 --lora-admin without an API key is refused at start (exit 2, naming --api-key)")
    r = subprocess.run([ZAYA, "serve", "--model", MODEL, "--port", "0", "--lora", "a=" + ADAPTER, "--lora",
                        "a=" + ADAPTER], capture_output=True, text=True, timeout=120)
    if r.returncode != 2 or "loaded already" not in r.stderr:
        fail(f"A2 a duplicate --lora name: exit {r.returncode}, {r.stderr[-300:]!r}")
    ok("A2 a duplicate --lora NAME is refused at start")

    L = Server("--lora", "ad=" + ADAPTER, "--lora-admin-without-key", "--max-loras", "2")
    if completion(L) != reference:
        fail("A3 the base model on an adapter server gives another greedy text")
    expect_field(L, "A3 an unknown model", post("/v1/completions", {**GREEDY, "model": "nope"}), 404, "model",
                 r'"ad"')
    expect_field(L, "A3 an unknown model in chat", post("/v1/chat/completions", {
        "model": "nope", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}), 404, "model")
    expect_field(L, "A3 echo on an adapter", post("/v1/completions", {**GREEDY, "model": "ad", "echo": True}), 400,
                 "echo")
    expect_field(L, "A4 a path that does not exist", load("b", os.path.join(WORK, "nowhere")), 400, "lora_path",
                 r"not a directory")
    expect_field(L, "A4 a directory that is no adapter", load("b", WORK), 400, "lora_path", r"adapter")
    expect_field(L, "A4 a duplicate name", load("ad", ADAPTER), 400, "lora_name", r"loaded already")
    expect_field(L, "A4 the base model's name", load(RUN_NAME, ADAPTER), 400, "lora_name", r"base model")
    expect_field(L, "A4 a name with a space", load("a b", ADAPTER), 400, "lora_name")
    expect_field(L, "A4 a 10 KB name", load("n" * 10_000, ADAPTER), 400, "lora_name")
    expect_field(L, "A4 a rank its tensors do not have", load("b", broken_copy("rank", r=8)), 400, "lora_path",
                 r"shape|rank|\[")
    expect_field(L, "A4 a target the model does not have", load("b", broken_copy("target", target_modules=[
        "q_proj", "gate_proj"])), 400, "lora_path", r"not supported")
    expect_field(L, "A4 lora_path missing", post("/v1/load_lora_adapter", {"lora_name": "b"}), 400, "lora_path")
    expect_field(L, "A4 lora_name not a string", post("/v1/load_lora_adapter", {"lora_name": 3, "lora_path": "x"}),
                 400, "lora_name")
    expect(L, "A4 a body that is no object", post("/v1/load_lora_adapter", b"[1]"), {400}, r"object")
    expect_field(L, "A5 unloading an adapter not loaded", post("/v1/unload_lora_adapter", {"lora_name": "zz"}), 404,
                 "lora_name", r'"ad"')
    expect(L, "A6 a good load", load("b", ADAPTER), {200})
    expect_field(L, "A6 past --max-loras 2", load("c", ADAPTER), 400, "lora_name", r"--max-loras")
    expect(L, "A6 a request for it", post("/v1/completions", {**GREEDY, "model": "b"}), {200})
    expect(L, "A6 its unload", post("/v1/unload_lora_adapter", {"lora_name": "b"}), {200})
    expect_field(L, "A6 a request for it after", post("/v1/completions", {**GREEDY, "model": "b"}), 404, "model")
    L.stop()

    # With --api-key: the admin endpoints need it (401), as /v1/* does.
    K = Server("--lora-admin", env={**os.environ, "ZAYA_API_KEY": "k3y"})
    status, _, body = raw(K.port, load("b", ADAPTER))
    if status != 401:
        fail(f"A7 a load without the API key: HTTP {status} {body[:200]!r}")
    status, _, body = raw(K.port, load("b", ADAPTER).replace(b"\r\n\r\n", b"\r\nAuthorization: Bearer k3y\r\n\r\n", 1))
    if status != 200:
        fail(f"A7 a load with the API key: HTTP {status} {body[:200]!r}")
    ok("A7 with --api-key, loading needs the key (401 without, 200 with)")
    K.stop()


if __name__ == "__main__":
    try:
        main()
    finally:
        for srv in servers:
            if srv.proc.poll() is None:
                srv.proc.kill()
