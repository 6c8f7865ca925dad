#!/usr/bin/env node
// Load generator for `nanoinfer serve` (or any OpenAI-compatible server): C clients, each sending
// R streaming /v1/completions requests one after another, all clients at once. Prints, per run,
// the aggregate generated tokens per second (all completion tokens / wall time from the first
// request to the last answer) and the time to first token (request sent -> first text chunk)
// as median / min / max over all requests. One JSON line per run goes to stdout after the table
// when --json is given. With --record FILE the rows are appended to FILE through
// `nanoinfer bench record`, which adds the provenance every bench record carries (commit, dirty,
// CPU model and flags, ISA, threads, time, command line): give it the server's -t and --isa
// (--threads, --isa; default: the server's defaults on this machine) and the binary (--nanoinfer).
//
//   node tools/serve-bench.mjs --url http://127.0.0.1:8080 --clients 1,4,8 --requests 4 \
//        --prompt "ROMEO:" --max-tokens 64 --record bench/serve-bench.jsonl
//
// Node 18+ only (global fetch); no packages.

import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:8080" },
    clients: { type: "string", default: "1,4,8" },
    requests: { type: "string", default: "4" },
    prompt: { type: "string", default: "ROMEO:" },
    "max-tokens": { type: "string", default: "64" },
    json: { type: "boolean", default: false },
    record: { type: "string" },
    nanoinfer: { type: "string", default: "build/release/nanoinfer" },
    threads: { type: "string" },
    isa: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (opt.help) {
  console.log("usage: node tools/serve-bench.mjs [--url URL] [--clients 1,4,8] [--requests R] " +
              "[--prompt TEXT] [--max-tokens N] [--json]\n" +
              "       [--record FILE [--nanoinfer BIN] [--threads N] [--isa NAME]]");
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

// The rows through `nanoinfer bench record`, the one writer of the provenance fields.
function record(lines) {
  const quote = (a) => (/^[A-Za-z0-9_.\/=:,+@%-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`);
  const args = ["bench", "record", "--results", opt.record,
                "--command-line", ["node", ...process.argv.slice(1)].map(quote).join(" ")];
  if (opt.threads !== undefined) args.push("-t", opt.threads);
  if (opt.isa !== undefined) args.push("--isa", opt.isa);
  const r = spawnSync(opt.nanoinfer, args, { input: lines.join("\n") + "\n", stdio: ["pipe", "inherit", "inherit"] });
  if (r.error) throw new Error(`cannot run ${opt.nanoinfer}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${opt.nanoinfer} bench record failed (exit ${r.status})`);
}

// The served model's id (`/v1/models`), so a record says what was measured.
async function servedModel() {
  const res = await fetch(`${opt.url}/v1/models`);
  if (!res.ok) throw new Error(`GET /v1/models: HTTP ${res.status}`);
  const id = (await res.json()).data?.[0]?.id;
  if (typeof id !== "string") throw new Error("GET /v1/models named no model");
  return id;
}

try {
  const model = await servedModel();
  await oneRequest();  // warm-up: page in the weights, start the workers
  const rows = [];
  for (const c of clientCounts) rows.push(await run(c));
  console.log("clients  requests  tokens  seconds  tok/s (aggregate)  TTFT ms median [min, max]");
  for (const r of rows) {
    console.log(`${String(r.clients).padStart(7)}  ${String(r.requests).padStart(8)}  ` +
                `${String(r.completion_tokens).padStart(6)}  ${r.seconds.toFixed(2).padStart(7)}  ` +
                `${r.tokens_per_s.toFixed(1).padStart(17)}  ${r.ttft_ms_median} [${r.ttft_ms_min}, ${r.ttft_ms_max}]`);
  }
  const lines = rows.map((r) => JSON.stringify({ bench: "serve", url: opt.url, model, prompt: opt.prompt, ...r }));
  if (opt.json) for (const l of lines) console.log(l);
  if (opt.record !== undefined) record(lines);
} catch (e) {
  console.error(`serve-bench: error: ${e.cause?.message ?? e.message}`);
  process.exit(1);
}
