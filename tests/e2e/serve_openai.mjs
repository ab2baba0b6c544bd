// The official `openai` npm client against zaya serve (run by tests/e2e/serve.sh):
// completions and chat, whole and streamed, and a bad request. Prints one JSON
// line per check for the shell test to compare; exits 1 on any unexpected error.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const sampling = { max_tokens: 16, seed: 3, temperature: 0.8, top_p: 0.95, top_k: 40 };
const out = (o) => console.log(JSON.stringify(o));

const c = await client.completions.create({ model: "tiny", prompt: "In the beginning", ...sampling });
out({ check: "completion", text: c.choices[0].text, finish: c.choices[0].finish_reason, usage: c.usage });

let streamed = "";
let finish = null;
for await (const chunk of await client.completions.create({
  model: "tiny", prompt: "In the beginning", stream: true, ...sampling })) {
  streamed += chunk.choices[0]?.text ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
out({ check: "completion_stream", text: streamed, finish });

const messages = [{ role: "system", content: "Answer briefly." }, { role: "user", content: "And God said" }];
const chat = await client.chat.completions.create({ model: "tiny", messages, ...sampling });
out({ check: "chat", text: chat.choices[0].message.content, role: chat.choices[0].message.role,
      finish: chat.choices[0].finish_reason });

let chatStreamed = "";
let role = null;
for await (const chunk of await client.chat.completions.create({
  model: "tiny", messages, stream: true, stream_options: { include_usage: true }, ...sampling })) {
  const delta = chunk.choices[0]?.delta;
  if (delta?.role) role = delta.role;
  chatStreamed += delta?.content ?? "";
  if (chunk.usage) out({ check: "chat_stream_usage", usage: chunk.usage });
}
out({ check: "chat_stream", text: chatStreamed, role });

try {
  await client.completions.create({ model: "tiny", prompt: "x", max_tokens: -5 });
  out({ check: "bad_request", status: 200 });
} catch (e) {
  if (!(e instanceof OpenAI.APIError)) throw e;
  out({ check: "bad_request", status: e.status, param: e.param, message: e.message });
}
