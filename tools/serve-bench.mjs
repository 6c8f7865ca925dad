#!/usr/bin/env node
// Load generator for `nanoinfer serve` (or any OpenAI-compatible server): C clients, each sending
// R streaming /v1/completions requests one after another, all clients at once. Prints, per run,
// the aggregate generated tokens per second (all completion tokens / wall time from the first
// request to the last answer) and the time to first token (request sent -> first text chunk)
// as median / min / max over all requests. One JSON line per run goes to stdout after the table
// when --json is given.
//
//   node tools/serve-bench.mjs --url http://127.0.0.1:8080 --clients 1,4,8 --requests 4 \
//        --prompt "ROMEO:" --max-tokens 64
//
// Node 18+ only (global fetch); no packages.

import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:8080" },
    clients: { type: "string", default: "1,4,8" },
    requests: { type: "string", default: "4" },
    prompt: { type: "string", default: "ROMEO:" },
    "max-tokens": { type: "string", default: "64" },
    json: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (opt.help) {
  console.log("usage: node tools/serve-bench.mjs [--url URL] [--clients 1,4,8] [--requests R] " +
              "[--prompt TEXT] [--max-tokens N] [--json]");
  process.exit(0);
}

function positive(name, text) {
  const v = Number(text);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`serve-bench: error: --${name} must be a positive integer, got '${text}'`);
    process.exit(2);
  }
  return v;
}
const clientCounts = opt.clients.split(",").map((c) => positive("clients", c));
const requestsPerClient = positive("requests", opt.requests);
const maxTokens = positive("max-tokens", opt["max-tokens"]);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// One streaming request: resolves to { ttft_ms, tokens } from the SSE stream's usage chunk.
async function oneRequest() {
  const sent = performance.now();
  const res = await fetch(`${opt.url}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      prompt: opt.prompt, max_tokens: maxTokens, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttft = null, tokens = null, buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const data = JSON.parse(event.slice(6));
      if (ttft === null && data.choices?.length && data.choices[0].text) ttft = performance.now() - sent;
      if (data.usage) tokens = data.usage.completion_tokens;
    }
  }
  if (tokens === null) throw new Error("the stream carried no usage chunk");
  return { ttft_ms: ttft ?? performance.now() - sent, tokens };
}

async function run(clients) {
  const results = [];
  const start = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    for (let i = 0; i < requestsPerClient; ++i) results.push(await oneRequest());
  }));
  const seconds = (performance.now() - start) / 1000;
  const tokens = results.reduce((a, r) => a + r.tokens, 0);
  const ttfts = results.map((r) => r.ttft_ms);
  return {
    clients, requests: results.length, max_tokens: maxTokens, completion_tokens: tokens,
    seconds: +seconds.toFixed(3), tokens_per_s: +(tokens / seconds).toFixed(1),
    ttft_ms_median: +median(ttfts).toFixed(1), ttft_ms_min: +Math.min(...ttfts).toFixed(1),
    ttft_ms_max: +Math.max(...ttfts).toFixed(1),
  };
}

try {
  await oneRequest();  // warm-up: page in the weights, start the workers
  const rows = [];
  for (const c of clientCounts) rows.push(await run(c));
  console.log("clients  requests  tokens  seconds  tok/s (aggregate)  TTFT ms median [min, max]");
  for (const r of rows) {
    console.log(`${String(r.clients).padStart(7)}  ${String(r.requests).padStart(8)}  ` +
                `${String(r.completion_tokens).padStart(6)}  ${r.seconds.toFixed(2).padStart(7)}  ` +
                `${r.tokens_per_s.toFixed(1).padStart(17)}  ${r.ttft_ms_median} [${r.ttft_ms_min}, ${r.ttft_ms_max}]`);
  }
  if (opt.json) for (const r of rows) console.log(JSON.stringify({ url: opt.url, prompt: opt.prompt, ...r }));
} catch (e) {
  console.error(`serve-bench: error: ${e.cause?.message ?? e.message}`);
  process.exit(1);
}
