// Load test of zaya serve (run by bench/serve_load.sh): CLIENTS concurrent
// clients send completions for SECONDS seconds over loopback, half of them
// streamed; every response is checked (status 200, a choice with text, a
// finish reason, usage that counts the tokens, a stream that ends with
// [DONE]). Prints one JSON line: requests, failures, tokens, throughput, and
// p50/p99 of latency and time to first token. Node's own fetch, no packages.
const [url, clients, seconds, maxTokens] = [process.argv[2], +process.argv[3], +process.argv[4], +process.argv[5]];
const prompts = ["In the beginning", "And God said", "Blessed are", "The LORD is my shepherd", "And it came to pass"];
const end = Date.now() + seconds * 1000;
const lat = [], ttft = [];
let ok = 0, failed = 0, tokens = 0, seq = 0;
const errors = [];

async function one(id, stream) {
  const body = { prompt: prompts[id % prompts.length], max_tokens: maxTokens, seed: id, temperature: 0.8, stream,
                 stream_options: stream ? { include_usage: true } : undefined };
  const t0 = performance.now();
  const res = await fetch(url + "/v1/completions", { method: "POST", headers: { "Content-Type": "application/json" },
                                                     body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  if (!stream) {
    const j = JSON.parse(await res.text());
    if (typeof j.choices?.[0]?.text !== "string" || !j.choices[0].finish_reason) throw new Error("bad body " + JSON.stringify(j));
    if (!(j.usage.completion_tokens >= 1 && j.usage.completion_tokens <= maxTokens)) throw new Error("bad usage");
    ttft.push(performance.now() - t0);
    return j.usage.completion_tokens;
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "", first = true, done = false, finish = null, used = 0;
  for (;;) {
    const { value, done: eof } = await reader.read();
    if (eof) break;
    if (first) { ttft.push(performance.now() - t0); first = false; }
    buf += dec.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (!line.startsWith("data: ")) continue;
      const data = line.slice(6);
      if (data === "[DONE]") { done = true; continue; }
      const j = JSON.parse(data);
      if (j.usage) used = j.usage.completion_tokens;
      else finish = j.choices[0].finish_reason ?? finish;
    }
  }
  if (!done || !finish || !(used >= 1)) throw new Error(`incomplete stream: done ${done}, finish ${finish}, usage ${used}`);
  return used;
}

async function client(c) {
  while (Date.now() < end) {
    const id = seq++;
    const t0 = performance.now();
    try {
      const n = await one(id, c % 2 === 1);  // (not `tokens += await ...`: that reads tokens before the await)
      tokens += n;
      lat.push(performance.now() - t0);
      ++ok;
    } catch (e) {
      ++failed;
      if (errors.length < 5) errors.push(String(e.message ?? e));
    }
  }
}

const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
const wall = (performance.now() - t0) / 1000;
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : 0; };
console.log(JSON.stringify({ clients, seconds: wall, requests: ok + failed, ok, failed, tokens,
  requests_per_second: ok / wall, tokens_per_second: tokens / wall,
  latency_ms: { p50: pct(lat, 0.5), p99: pct(lat, 0.99) }, first_byte_ms: { p50: pct(ttft, 0.5), p99: pct(ttft, 0.99) },
  errors }));
process.exit(failed > 0 ? 1 : 0);
