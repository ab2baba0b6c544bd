#!/usr/bin/env bash
# Load test of zaya serve on loopback: CLIENTS concurrent clients (default 64,
# half of them streaming; bench/serve_load.py, the openai Python client) for SECONDS seconds (default 60), MAX_TOKENS tokens
# each, against a tiny model trained here (or MODEL). The server admits
# 2 x CLIENTS requests at once: a request counts until its connection's
# response is released, which a client's next request can overtake. Reports throughput and
# p50/p99 latency, and fails when any request is lost or malformed or a
# (prompt, seed) pair's text changes between requests; then checks that the
# server's own counters agree (every request answered 200, nothing left
# running, no KV page reserved).
#   bench/serve_load.sh [CLIENTS] [SECONDS] [MAX_TOKENS] [MODEL]
# SERVE_ARGS adds flags to zaya serve (e.g. "--kv-cache-mb 1": a pool of a few
# sequences, so requests queue for pages and prefix snapshots are evicted).
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-64} seconds=${2:-60} max_tokens=${3:-32} model=${4:-}
zaya=${ZAYA:-build/zaya}
# The clients: the official openai package, from the pinned environment (scripts/python-env.sh).
python=$(scripts/python-env.sh)
dir=runs/bench/serve_load
mkdir -p "$dir"
# shellcheck source=bench/train_tiny.bash
source bench/train_tiny.bash
if [[ -z $model ]]; then
  train_tiny "$dir" 30 64
  model=$dir/run/final
fi
# shellcheck disable=SC2086 # SERVE_ARGS is a list of flags
"$zaya" serve --model "$model" --port 0 --batch 16 --max-concurrent $((2 * clients)) ${SERVE_ARGS:-} 2>"$dir/serve.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "on http://" "$dir/serve.log" && break; sleep 0.2; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$dir/serve.log" | head -1)
[[ -n $url ]] || { cat "$dir/serve.log"; exit 1; }
echo "== $clients clients for $seconds s, $max_tokens tokens each, against $url ($model)"
rc=0
"$python" bench/serve_load.py "$url" "$clients" "$seconds" "$max_tokens" | tee "$dir/result.json" || rc=$?
curl -s "$url/metrics" >"$dir/metrics.txt"
grep -E '^zaya_requests_total\{endpoint="/v1/completions"|^zaya_sequences_running|^zaya_queue_depth|^zaya_requests_cancelled_total|^zaya_kv_pages|^zaya_prefix_cache' "$dir/metrics.txt"
python3 - "$dir/result.json" "$dir/metrics.txt" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
m = open(sys.argv[2]).read()
served = sum(int(v) for v in re.findall(r'^zaya_requests_total\{endpoint="/v1/completions",status="200"\} (\d+)$', m, re.M))
print(f"throughput {r['tokens_per_second']:.0f} tokens/s, {r['requests_per_second']:.1f} requests/s; latency p50 "
      f"{r['latency_ms']['p50']:.0f} ms, p99 {r['latency_ms']['p99']:.0f} ms; first byte p50 {r['first_byte_ms']['p50']:.0f} ms, "
      f"p99 {r['first_byte_ms']['p99']:.0f} ms")
gauge = lambda name: int(re.search(rf'^{name} (\d+)$', m, re.M).group(1))
print(f"requests: {r['ok']} ok, {r['failed']} failed, {r['mismatched']} with a changed text; the server answered "
      f"{served} with 200; {gauge('zaya_sequences_running')} running, {gauge('zaya_kv_pages_reserved')} KV pages reserved "
      f"at the end; prefix cache hit tokens {gauge('zaya_prefix_cache_hit_tokens_total')}")
sys.exit(0 if r["failed"] == 0 and r["mismatched"] == 0 and served == r["ok"] and
         gauge('zaya_sequences_running') == 0 and gauge('zaya_kv_pages_reserved') == 0 else 1)
PY
exit $rc
