#!/usr/bin/env bash
# Prefix caching on zaya serve, measured: time to first token of requests that
# share a long system prompt (SYSTEM_TOKENS of KJV text, default 768) and differ
# in their last words, with the prefix cache off and on (loopback, one request
# at a time, max_tokens 1, so the time is the prompt's prefill plus one
# token), and the KV memory the cached prefix holds: its pages (and small state)
# from /metrics, against a whole slot at full context (what a snapshot cost
# before the paged cache).
#   bench/serve_prefix.sh MODEL [SYSTEM_TOKENS] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1 system_tokens=${2:-768} requests=${3:-8}
zaya=${ZAYA:-build/zaya}
dir=runs/bench/serve_prefix
mkdir -p "$dir"
run() {  # run NAME ARGS...: start a server, time the requests, print one JSON line
  local name=$1
  shift
  "$zaya" serve --model "$model" --port 0 --batch 4 "$@" >/dev/null 2>"$dir/$name.log" &
  local server=$!
  for _ in $(seq 100); do grep -q "on http://" "$dir/$name.log" && break; sleep 0.2; done
  local url
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$dir/$name.log" | head -1)
  [[ -n $url ]] || { cat "$dir/$name.log"; kill $server; exit 1; }
  local rc=0
  python3 - "$url" "$system_tokens" "$requests" "$name" "$dir/$name.log" <<'PY' || rc=$?
import json, re, sys, time, urllib.request
url, system_tokens, requests, name, log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
words = open("data/kjv/kjv.txt").read().split()
def post(prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    j = json.load(urllib.request.urlopen(req))
    return time.perf_counter() - t0, j["usage"]["prompt_tokens"]
def metric(name):
    m = urllib.request.urlopen(url + "/metrics").read().decode()
    return int(re.search(rf"^{name} (\d+)$", m, re.M).group(1))
# The system prompt: as many words as give about system_tokens tokens (measured by the server).
n = system_tokens // 2
_, got = post(" ".join(words[20000:20000 + n]))  # a text the timed prompts do not begin with
n = max(1, int(n * system_tokens / got))
system = " ".join(words[:n])
times, prompt_tokens = [], 0
for i in range(requests):
    t, prompt_tokens = post(system + f" Question {i}: and the {words[1000 + i]}")
    times.append(t)
start = open(log).read()
pages, page_bytes = map(int, re.search(r"KV pool (\d+) pages of \d+ tokens, (\d+) bytes each", start).groups())
print(json.dumps({"cache": name, "prompt_tokens": prompt_tokens, "first_ms": round(times[0] * 1e3, 1),
                  "rest_median_ms": round(sorted(times[1:])[len(times[1:]) // 2] * 1e3, 1),
                  "prefill_tokens": metric("zaya_prefill_tokens_total"),
                  "hit_tokens": metric("zaya_prefix_cache_hit_tokens_total"),
                  "snapshots": metric("zaya_prefix_cache_snapshots"),
                  "pages_used_idle": metric("zaya_kv_pages_used"), "page_bytes": page_bytes, "pool_pages": pages,
                  "pool_mb": pages * page_bytes / 2**20}))
PY
  kill $server
  wait $server 2>/dev/null || true
  return $rc
}
echo "== $requests requests sharing a system prompt of about $system_tokens tokens, max_tokens 1 ($model)"
run off --prefix-cache-mb 0 | tee "$dir/off.json"
run on --prefix-cache-mb 64 | tee "$dir/on.json"
python3 - "$dir/off.json" "$dir/on.json" <<'PY'
import json, sys
off, on = (json.load(open(p)) for p in sys.argv[1:])
print(f"time to first token, {on['prompt_tokens']}-token prompts: no cache {off['rest_median_ms']} ms (median of the "
      f"repeats); cache miss {on['first_ms']} ms, cache hit {on['rest_median_ms']} ms "
      f"({off['rest_median_ms'] / on['rest_median_ms']:.1f}x)")
print(f"prefill tokens run: {off['prefill_tokens']} without the cache, {on['prefill_tokens']} with it "
      f"({on['hit_tokens']} restored)")
slot_mb = off['pool_mb'] / 4  # the off server's pool is its 4 slots at full context
print(f"KV memory of the {on['snapshots']} snapshots when idle: {on['pages_used_idle']} pages of "
      f"{on['page_bytes']} bytes = {on['pages_used_idle'] * on['page_bytes'] / 2**20:.2f} MB (shared pages counted once); "
      f"as whole slots at full context (before pages): {on['snapshots']} x {slot_mb:.2f} MB = "
      f"{on['snapshots'] * slot_mb:.2f} MB")
PY
