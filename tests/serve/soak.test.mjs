// The soak test of `nanoinfer serve`: `--parallel 4 --queue 8` with the default
// model under 8 concurrent clients, each running a fixed list of requests that mixes good
// ones (plain and streamed, and large JSON Schemas), malformed JSON, oversized bodies, clients
// that leave mid-request and clients that send their request slowly. Asserts that every well-formed request is
// answered 200 or 503, /health answers throughout, the server's RSS stays under RSS_BOUND_MB,
// and /metrics counts exactly the requests that were made. Bounded by counts (about a minute
// on a loaded 2-core machine). Run by CTest (test `serve_soak`):
//
//   node tests/serve/soak.test.mjs --nanoinfer build/release/nanoinfer [--rounds N] [--rss-bound-mb M]
//
// A server built with the sanitizers is ~10x slower and its RSS holds ASan's shadow memory and
// quarantine: CMake passes fewer rounds and a larger RSS bound there (CMakeLists.txt).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from './serve_process.mjs';

const { values: args } = parseArgs({
  options: { nanoinfer: { type: 'string' }, rounds: { type: 'string' }, 'rss-bound-mb': { type: 'string' } },
});
if (!args.nanoinfer) {
  console.error('usage: soak.test.mjs --nanoinfer BINARY');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) {
  console.log('serve_soak: skipped: data/default-model is missing');
  process.exit(77);
}

const CLIENTS = 8;
const ROUNDS = Number(args.rounds ?? 30);                  // per client; a round runs every kind once
const RSS_BOUND_MB = Number(args['rss-bound-mb'] ?? 128);  // the default model serves in ~25 MB; a body is at most 4 MiB
if (!(Number.isInteger(ROUNDS) && ROUNDS > 0 && RSS_BOUND_MB > 0)) {
  console.error('soak.test.mjs: --rounds must be a positive integer and --rss-bound-mb positive');
  process.exit(2);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function rssKb(pid) {
  return Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m)[1]);
}

// One request on its own connection, written in `pieces` with `gap` ms between them; resolves
// with the status (0 if the connection ended without an answer) and body.
function rawRequest(port, text, { pieces = 1, gap = 0, leave = false } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    sock.on('data', (d) => { got += d; });
    sock.on('error', () => {});
    sock.on('close', () => {
      const m = got.match(/^HTTP\/1\.1 (\d{3}) /);
      resolve({ status: m ? Number(m[1]) : 0, body: got.slice(got.indexOf('\r\n\r\n') + 4) });
    });
    const size = Math.ceil(text.length / pieces);
    let i = 0;
    const next = () => {
      if (sock.destroyed) return;
      const part = text.slice(i * size, (i + 1) * size);
      ++i;
      if (i >= pieces) {
        sock.write(part, () => { if (leave) sock.destroy(); });
      } else {
        sock.write(part);
        setTimeout(next, gap);
      }
    };
    next();
  });
}

function post(route, body) {
  return `POST ${route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
         `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

test('soak: 8 clients mixing good, malformed, oversized, leaving and slow requests', { timeout: 480000 }, async () => {
  const started = await startServe(args.nanoinfer, ['--parallel', '4', '--queue', '8', '--quiet'], { stderr: 'inherit' });
  const { proc: server, base, port } = started;
  const sent = {};      // kind -> requests made
  const statuses = {};  // status -> answers seen by clients
  const bad = [];
  let peakRss = 0;
  let healthChecks = 0;
  const count = (obj, key) => { obj[key] = (obj[key] ?? 0) + 1; };

  let running = true;
  const monitor = (async () => {
    while (running) {
      peakRss = Math.max(peakRss, rssKb(server.pid));
      await sleep(100);
    }
  })();

  const chat = (i, extra = {}) => JSON.stringify({
    messages: [{ role: 'user', content: `Tell me about thing number ${i}.` }], max_tokens: 8 + (i % 5) * 8, ...extra,
  });
  const kinds = {
    async good(i) {
      const r = await rawRequest(port, post('/v1/chat/completions', chat(i)));
      if (r.status === 200) {
        const j = JSON.parse(r.body);
        if (j.choices?.[0]?.message?.role !== 'assistant') bad.push(`good: ${r.body.slice(0, 200)}`);
      }
      return r.status;
    },
    async stream(i) {
      const r = await rawRequest(port, post('/v1/completions', JSON.stringify({ prompt: `Once ${i}`, max_tokens: 24, stream: true })));
      if (r.status === 200 && !r.body.includes('data: [DONE]')) bad.push(`stream without [DONE]: ${r.body.slice(-200)}`);
      return r.status;
    },
    async malformed(i) {
      return (await rawRequest(port, post('/v1/chat/completions', `{"messages": [${i}`))).status;
    },
    async oversized() {
      return (await rawRequest(port, post('/v1/completions', JSON.stringify({ prompt: 'x'.repeat(5 << 20) })))).status;
    },
    async leaving(i) {
      return (await rawRequest(port, post('/v1/chat/completions', chat(i, { max_tokens: 150 })), { leave: true })).status;
    },
    // Three at once from one client: 8 clients can then ask for more than the 12 places.
    async burst(i) {
      const all = await Promise.all([0, 1, 2].map((k) => kinds.good(i * 10 + k)));
      count(sent, 'burstExtra');
      count(sent, 'burstExtra');
      for (const s of all.slice(1)) {
        count(statuses, s);
        if (![200, 503].includes(s)) bad.push(`burst ${i}: status ${s}`);
      }
      return all[0];
    },
    // A large schema beside the streams: 400 properties compiled under the grammar budget,
    // two compiles at a time, while the other clients generate.
    async schema(i) {
      const properties = Object.fromEntries(Array.from({ length: 400 }, (_, k) => [`field_${i}_${k}`, { type: 'integer' }]));
      const body = JSON.stringify({
        prompt: `Record ${i}:`, max_tokens: 8,
        response_format: { type: 'json_schema', json_schema: { name: 'r', schema: { type: 'object', properties } } },
      });
      return (await rawRequest(port, post('/v1/completions', body))).status;
    },
    async slow(i) {
      return (await rawRequest(port, post('/v1/chat/completions', chat(i)), { pieces: 8, gap: 150 })).status;
    },
  };
  const wellFormed = new Set(['good', 'stream', 'burst', 'schema', 'slow']);
  const expected = { malformed: [400], oversized: [413], leaving: [0] };

  const client = async (c) => {
    for (let round = 0; round < ROUNDS; ++round) {
      for (const kind of Object.keys(kinds)) {
        const i = c * 1000 + round;
        count(sent, kind);
        let s;
        try {
          s = await kinds[kind](i);
        } catch (e) {
          bad.push(`${kind}: ${e.message}`);
          continue;
        }
        if (kind !== 'leaving') count(statuses, s);
        if (wellFormed.has(kind) ? ![200, 503].includes(s) : !expected[kind].includes(s)) {
          bad.push(`${kind} ${i}: status ${s}`);
        }
      }
      const h = await fetch(`${base}/health`, { signal: AbortSignal.timeout(60000) });
      ++healthChecks;
      if (h.status !== 200) bad.push(`/health: ${h.status}`);
      await h.text();
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  running = false;
  await monitor;

  // Let the leaving requests' cancellations land.
  let text = '';
  let metricsFetches = 0;
  const value = (name) => Number(text.match(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm'))?.[1] ?? 0);
  for (let waited = 0; waited < 60000; waited += 200) {
    text = await (await fetch(`${base}/metrics`)).text();
    ++metricsFetches;
    if (value('nanoinfer_active_sequences') === 0 && value('nanoinfer_queue_depth') === 0) break;
    await sleep(200);
  }
  // A /metrics answer is counted once sent: the last one is not in its own text.
  const metricsCounted = metricsFetches - 1;
  const byStatus = {};
  for (const m of text.matchAll(/^nanoinfer_requests_total\{status="(\d+)"\} (\d+)$/gm)) byStatus[m[1]] = Number(m[2]);
  const total = Object.values(byStatus).reduce((a, b) => a + b, 0);
  const made = Object.values(sent).reduce((a, b) => a + b, 0) + healthChecks;

  const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  server.kill('SIGTERM');
  const { code, signal } = await exited;

  console.log(`soak: ${made} requests, answers by status ${JSON.stringify(statuses)}, server counted ` +
              `${JSON.stringify(byStatus)}, peak RSS ${(peakRss / 1024).toFixed(1)} MB`);
  assert.deepEqual(bad, []);
  assert.equal(code, 0);
  assert.equal(signal, null);
  assert.ok(peakRss < RSS_BOUND_MB * 1024, `peak RSS ${peakRss} kB`);
  // Every request reached a handler or was refused by the front, and was counted once.
  assert.equal(total, made + metricsCounted, JSON.stringify(byStatus));
  assert.equal(byStatus['400'], sent.malformed);
  assert.equal(byStatus['413'], sent.oversized);
  assert.equal(byStatus['413'], statuses['413']);
  // Answers the clients saw are what the server counted; the leaving ones are 200 (done
  // before the server noticed), 499 (cancelled) or 503 (no room).
  const wellAnswered = (statuses['200'] ?? 0) + (statuses['503'] ?? 0);
  assert.equal(wellAnswered, sent.good + sent.stream + sent.burst + sent.burstExtra + sent.schema + sent.slow);
  assert.equal((byStatus['200'] ?? 0) + (byStatus['503'] ?? 0) + (byStatus['499'] ?? 0),
               wellAnswered + healthChecks + sent.leaving + metricsCounted);
  assert.ok((statuses['200'] ?? 0) > sent.good, 'most requests were served');
});
