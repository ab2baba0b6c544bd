// Load test of zaya serve (run by bench/serve_load.sh): CLIENTS concurrent
// clients send completions for SECONDS seconds over loopback, half of them
// streamed; every response is checked (status 200, a choice with text, a
// finish reason, usage that counts the tokens, a stream that ends with
// [DONE]), and so is every text: requests repeat 40 (prompt, seed) pairs, and
// each pair must give the same text every time, streamed or not, whatever it
// was batched with (half the prompts share a system prompt of a few hundred
// tokens, so they run on shared prefix-cache pages). Prints one JSON line:
// requests, failures, mismatched texts, tokens, throughput, and p50/p99 of
// latency and time to first token. Node's own fetch, no packages.
const [url, clients, seconds, maxTokens] = [process.argv[2], +process.argv[3], +process.argv[4], +process.argv[5]];
const prompts = ["In the beginning", "And God said", "Blessed are", "The LORD is my shepherd", "And it came to pass"];
const system = "And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of " +
  "God moved upon the face of the waters. And God said, Let there be light: and there was light. And God saw the " +
  "light, that it was good: and God divided the light from the darkness. And God called the light Day, and the " +
  "darkness he called Night. And the evening and the morning were the first day. And God said, Let there be a " +
  "firmament in the midst of the waters, and let it divide the waters from the waters. ";
const texts = new Map();  // (prompt, seed) -> the first text it gave
let mismatched = 0;
const end = Date.now() + seconds * 1000;
const lat = [], ttft = [];
let ok = 0, failed = 0, tokens = 0, seq = 0;
const errors = [];

async function one(id, stream) {
  const key = id % 40;  // prompt id % 10 (with or without the system prompt), seed id % 8
  const body = { prompt: (key % 2 ? system : "") + prompts[key % 5], max_tokens: maxTokens, seed: key % 8,
                 temperature: 0.8, stream,
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
    same(key, j.choices[0].text);
    return j.usage.completion_tokens;
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "", first = true, done = false, finish = null, used = 0, text = "";
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
      else {
        finish = j.choices[0].finish_reason ?? finish;
        text += j.choices[0].text ?? "";
      }
    }
  }
  if (!done || !finish || !(used >= 1)) throw new Error(`incomplete stream: done ${done}, finish ${finish}, usage ${used}`);
  same(key, text);
  return used;
}

// The text of a (prompt, seed) pair must not change between requests.
function same(key, text) {
  if (!texts.has(key)) texts.set(key, text);
  else if (texts.get(key) !== text) {
    ++mismatched;
    if (errors.length < 5) errors.push(`pair ${key}: ${JSON.stringify(text)} != ${JSON.stringify(texts.get(key))}`);
  }
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
console.log(JSON.stringify({ clients, seconds: wall, requests: ok + failed, ok, failed, mismatched, tokens,
  requests_per_second: ok / wall, tokens_per_second: tokens / wall,
  latency_ms: { p50: pct(lat, 0.5), p99: pct(lat, 0.99) }, first_byte_ms: { p50: pct(ttft, 0.5), p99: pct(ttft, 0.99) },
  errors }));
process.exit(failed > 0 || mismatched > 0 ? 1 : 0);
