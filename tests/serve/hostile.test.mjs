// `nanoinfer serve` (and viz's page server) against hostile clients (docs/SERVING.md, "Facing
// the internet"): bodies, threads, slow and idle clients, clients that leave, security
// defaults, --queue, --host and --max-connections, with raw sockets where a client library
// would refuse to misbehave. Each server is started on a free loopback port with the default model.
// Run by CTest (test `serve_hostile`):
//
//   node tests/serve/hostile.test.mjs --nanoinfer build/release/nanoinfer
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when the default model is missing. Waits
// are bounded deadlines (generous: the machine may be loaded); nothing is timed.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from './serve_process.mjs';

const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' } } });
if (!args.nanoinfer) {
  console.error('usage: hostile.test.mjs --nanoinfer BINARY');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) {
  console.log('serve_hostile: skipped: data/default-model is missing');
  process.exit(77);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// `nanoinfer serve --port 0 ...extra`, its stderr collected (serve_process.mjs).
const startServer = (extra = []) => startServe(args.nanoinfer, extra);

// Sends `data` on a new connection and collects what comes back until the server closes it
// (or `deadline` ms pass: then whatever came).
function raw(port, data, deadline = 30000) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => { sock.destroy(); resolve(got); }, deadline);
    sock.on('data', (d) => { got += d; });
    sock.on('error', () => {});
    sock.on('close', () => { clearTimeout(timer); resolve(got); });
    sock.write(data);
  });
}

function status(response) {
  const m = response.match(/^HTTP\/1\.[01] (\d{3}) /);
  return m ? Number(m[1]) : 0;
}
function jsonBody(response) {
  return JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4));
}

async function metrics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (name) => Number(text.match(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm'))?.[1] ?? 0);
  return { text, value };
}

// kB from /proc/PID/status: VmRSS (now) or VmHWM (peak).
function procKb(pid, field) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return Number(m[1]);
}

const json = 'Content-Type: application/json\r\n';

// ---- bodies --------------------------------------------------------------------------------------

test('a chunked body is refused (411) before it is read, and the peak RSS does not grow', async () => {
  const s = await startServer();
  try {
    const peakBefore = procKb(s.proc.pid, 'VmHWM');
    const answer = await new Promise((resolve) => {
      const sock = net.connect(s.port, '127.0.0.1');
      let got = '';
      let sent = 0;
      const chunk = Buffer.alloc(1 << 20, 'a');
      const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
      sock.on('data', (d) => { got += d; });
      sock.on('error', () => {});
      sock.on('close', () => resolve(got));
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n${json}Transfer-Encoding: chunked\r\n\r\n` +
                 '1a\r\n{"max_tokens":1,"prompt":"\r\n');
      // Up to 48 MiB, a frame at a time, until the answer comes. Between frames the event loop
      // reads what came back: a client still sending when the server gives up draining (64 MiB
      // or 2 s) is reset, and a reset can discard an answer not yet read: a tight write loop on
      // a loaded machine can lose the 411 that way.
      const pump = () => {
        if (got !== '' || sock.destroyed) return;
        if (sent >= 48) {
          sock.end('0\r\n\r\n');
          return;
        }
        ++sent;
        sock.write(frame, () => setImmediate(pump));
      };
      pump();
    });
    assert.equal(status(answer), 411, answer.slice(0, 300));
    assert.equal(jsonBody(answer).error.code, 'length_required');
    const grown = procKb(s.proc.pid, 'VmHWM') - peakBefore;
    assert.ok(grown < 16 * 1024, `peak RSS grew by ${grown} kB`);
    assert.equal((await fetch(`${s.base}/health`)).status, 200);
  } finally {
    await s.stop();
  }
});

test('a prompt longer than the context can hold is refused by its size, before it is tokenized', async () => {
  const s = await startServer();
  try {
    const res = await fetch(`${s.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'hello '.repeat(500000), max_tokens: 1 }),
    });
    const j = await res.json();
    assert.equal(res.status, 400);
    assert.equal(j.error.code, 'context_length_exceeded');
    assert.match(j.error.message, /the prompt is 3000000 bytes, at least \d+ tokens, but the context holds 256/);
  } finally {
    await s.stop();
  }
});

// ---- no threads ----------------------------------------------------------------------------------

// ASan reserves terabytes of shadow address space at start, so under `ulimit -v` a sanitized
// binary dies before main(); CTest sets NANOINFER_SANITIZED there and the release run covers it.
test('serve that cannot start its threads says so in one line and exits 1',
     { skip: process.env.NANOINFER_SANITIZED ? 'a sanitized binary cannot start under ulimit -v' : false }, () => {
  // 100 running and 900 waiting requests need ~1000 request threads (8 MiB of address space
  // each): a 2 GiB address-space limit refuses some.
  const r = spawnSync('sh', ['-c', `ulimit -v 2097152 && exec "$0" serve --port 0 --parallel 100 --queue 900`,
                             args.nanoinfer], { encoding: 'utf8', timeout: 120000 });
  assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`);
  assert.equal(r.status, 1, r.stderr);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], /^nanoinfer: error: cannot start the server's threads/);
  assert.equal(r.stdout, '');
});

// ---- slow and idle clients -----------------------------------------------------------------------

test('clients sending their headers a byte at a time do not starve /health, and time out (408)', async () => {
  // 1 + 1 + 4 = 6 request threads: were slow clients to hold threads, 40 would hold them all.
  const s = await startServer(['--parallel', '1', '--queue', '1']);
  const slow = [];
  try {
    const head = `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n${json}X-Slow: ${'a'.repeat(200)}`;
    for (let i = 0; i < 40; ++i) {
      const sock = net.connect(s.port, '127.0.0.1');
      const c = { sock, got: '', closed: false, sent: 0 };
      sock.on('data', (d) => { c.got += d; });
      sock.on('error', () => {});
      sock.on('close', () => { c.closed = true; });
      c.timer = setInterval(() => {
        if (!sock.destroyed && c.sent < head.length) sock.write(head[c.sent++]);
      }, 500);
      slow.push(c);
    }
    await sleep(2000);
    const health = await fetch(`${s.base}/health`, { signal: AbortSignal.timeout(30000) });
    assert.equal(health.status, 200);
    // Every slow head is cut off: 408 with a JSON error, then the connection closes.
    for (let waited = 0; waited < 60000 && !slow.every((c) => c.closed); waited += 200) await sleep(200);
    for (const c of slow) {
      assert.ok(c.closed, 'a slow client is still connected');
      assert.equal(status(c.got), 408, c.got.slice(0, 200));
      assert.equal(jsonBody(c.got).error.code, 'request_timeout');
    }
    assert.equal((await metrics(s.base)).value('nanoinfer_requests_total{status="408"}'), 40);
  } finally {
    for (const c of slow) { clearInterval(c.timer); c.sock.destroy(); }
    await s.stop();
  }
});

test('connections beyond --max-connections get 503; idle connections are closed', async () => {
  const s = await startServer(['--max-connections', '8']);
  const idle = [];
  try {
    for (let i = 0; i < 8; ++i) {
      const sock = net.connect(s.port, '127.0.0.1');
      const c = { sock, got: '', closed: false };
      sock.on('data', (d) => { c.got += d; });
      sock.on('error', () => {});
      sock.on('close', () => { c.closed = true; });
      await new Promise((resolve) => sock.on('connect', resolve));
      idle.push(c);
    }
    await sleep(500);
    const over = await raw(s.port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    assert.equal(status(over), 503, over);
    assert.equal(jsonBody(over).error.code, 'too_many_connections');
    // The idle ones (nothing sent) are closed without an answer.
    for (let waited = 0; waited < 60000 && !idle.every((c) => c.closed); waited += 200) await sleep(200);
    for (const c of idle) {
      assert.ok(c.closed, 'an idle connection is still open');
      assert.equal(c.got, '');
    }
    assert.equal((await fetch(`${s.base}/health`)).status, 200);
  } finally {
    for (const c of idle) c.sock.destroy();
    await s.stop();
  }
});

test("viz's page server answers while another connection sits idle", async () => {
  const proc = spawn(args.nanoinfer, ['viz', '-p', 'ROMEO:', '-n', '3', '--temp', '0', '-t', '1', '--port', '0',
                                      '--max-requests', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  let idle;
  try {
    const port = await new Promise((resolve, reject) => {
      let out = '';
      proc.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
        if (m) resolve(Number(m[1]));
      });
      proc.on('exit', (code) => reject(new Error(`viz exited with ${code}`)));
    });
    // A browser's preconnect: a connection that sends nothing.
    idle = net.connect(port, '127.0.0.1');
    idle.on('error', () => {});
    await new Promise((resolve) => idle.on('connect', resolve));
    const page = await raw(port, 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 30000);
    assert.equal(status(page), 200, page.slice(0, 200));
    assert.equal((await exited).code, 0);
  } finally {
    idle?.destroy();
    proc.kill();
  }
});

// ---- clients that leave --------------------------------------------------------------------------

test('a client that leaves a non-streaming request cancels its generation', async () => {
  const s = await startServer(['--parallel', '1', '--queue', '0']);
  try {
    const before = await metrics(s.base);
    const body = JSON.stringify({ prompt: 'ROMEO:', max_tokens: 240, temperature: 0 });
    // Send the whole request, then close the connection at once.
    await new Promise((resolve) => {
      const sock = net.connect(s.port, '127.0.0.1');
      sock.on('error', () => {});
      sock.on('close', resolve);
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n${json}Content-Length: ${body.length}\r\n\r\n${body}`,
                 () => sock.destroy());
    });
    let after;
    for (let waited = 0; waited < 30000; waited += 100) {
      after = await metrics(s.base);
      if (after.value('nanoinfer_requests_total{status="499"}') === 1 && after.value('nanoinfer_active_sequences') === 0) break;
      await sleep(100);
    }
    assert.equal(after.value('nanoinfer_requests_total{status="499"}'), 1, after.text);
    assert.equal(after.value('nanoinfer_active_sequences'), 0);
    // Greedy from "ROMEO:" this model never stops by itself within 240 tokens (a finished
    // request would add 240); a cancelled one stops early.
    const generated = after.value('nanoinfer_completion_tokens_total') - before.value('nanoinfer_completion_tokens_total');
    assert.ok(generated < 240, `the abandoned request generated ${generated} tokens`);
    // Its slot is free: with one slot and no queue, the next request runs.
    const res = await fetch(`${s.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ prompt: 'hi', max_tokens: 2 }),
    });
    assert.equal(res.status, 200);
  } finally {
    await s.stop();
  }
});

// ---- security defaults ---------------------------------------------------------------------------

test('--api-key "" is an error, not a server without authentication', () => {
  const r = spawnSync(args.nanoinfer, ['serve', '--port', '0', '--api-key', ''], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /^nanoinfer: error: --api-key is empty[^\n]*\n$/);
});

test('--prefill-chunk out of range is a one-line error', () => {
  for (const v of ['0', '-1', '1048577']) {
    const r = spawnSync(args.nanoinfer, ['serve', '--port', '0', '--prefill-chunk', v], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 1, v);
    assert.match(r.stderr, /^nanoinfer: error: --prefill-chunk must be in 1\.\.1048576, got -?\d+\n$/, v);
  }
});

test('--step-tokens out of range is a one-line error', () => {
  for (const v of ['0', '-1', '1048577']) {
    const r = spawnSync(args.nanoinfer, ['serve', '--port', '0', '--step-tokens', v], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 1, v);
    assert.match(r.stderr, /^nanoinfer: error: --step-tokens must be in 1\.\.1048576, got -?\d+\n$/, v);
  }
});

test('--step-latency out of range is a one-line error', () => {
  for (const v of ['0.5', '-1', '1001', 'nan', 'inf']) {
    const r = spawnSync(args.nanoinfer, ['serve', '--port', '0', '--step-latency', v], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 1, v);
    assert.match(r.stderr, /^nanoinfer: error: --step-latency must be 0 \(off\) or in 1\.\.1000, got \S+\n$/, v);
  }
});

test('a non-loopback address without --api-key is served with a warning', async () => {
  const s = await startServer(['--host', '0.0.0.0']);
  try {
    assert.match(s.stderr(), /warning: listening on 0\.0\.0\.0 without --api-key/);
  } finally {
    await s.stop();
  }
  const k = await startServer(['--host', '0.0.0.0', '--api-key', 'k']);
  try {
    assert.doesNotMatch(k.stderr(), /warning/);
  } finally {
    await k.stop();
  }
});

test('without a key: foreign Host headers and non-JSON bodies are refused', async () => {
  const s = await startServer();
  try {
    const body = JSON.stringify({ prompt: 'hi', max_tokens: 1 });
    const post = (host, type) => raw(s.port, `POST /v1/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: ${type}\r\n` +
                                             `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    const rebound = await post('evil.example:8080', 'application/json');
    assert.equal(status(rebound), 403, rebound);
    assert.equal(jsonBody(rebound).error.code, 'forbidden_host');
    const health = await raw(s.port, 'GET /health HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n');
    assert.equal(status(health), 403);
    for (const host of [`127.0.0.1:${s.port}`, `localhost:${s.port}`, 'LOCALHOST', '[::1]:1', '10.1.2.3']) {
      assert.equal(status(await post(host, 'application/json; charset=utf-8')), 200, host);
    }
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const r = await post('127.0.0.1', type);
      assert.equal(status(r), 415, `${type}: ${r}`);
      assert.equal(jsonBody(r).error.code, 'unsupported_media_type');
    }
  } finally {
    await s.stop();
  }
  // With a key, any Host may call (a proxy in front names itself); bodies are still JSON only.
  const k = await startServer(['--api-key', 'sekrit']);
  try {
    const body = JSON.stringify({ prompt: 'hi', max_tokens: 1 });
    const post = (auth, type = 'application/json') => raw(k.port,
      `POST /v1/completions HTTP/1.1\r\nHost: api.example\r\nAuthorization: ${auth}\r\nContent-Type: ${type}\r\n` +
      `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    assert.equal(status(await post('Bearer sekrit')), 200);
    for (const wrong of ['Bearer sekri', 'Bearer sekrit2', 'Bearer SEKRIT', 'bearer sekrit', 'sekrit', 'Bearer ']) {
      assert.equal(status(await post(wrong)), 401, wrong);
    }
    assert.equal(status(await post('Bearer sekrit', 'text/plain')), 415);
  } finally {
    await k.stop();
  }
});

test('ambiguous framing is refused: duplicate Content-Length, Content-Length with Transfer-Encoding', async () => {
  const s = await startServer();
  try {
    const body = JSON.stringify({ prompt: 'hi', max_tokens: 1 });
    const head = `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n${json}`;
    const cases = [
      ['two equal Content-Length', `Content-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 400],
      ['two different Content-Length', `Content-Length: ${body.length}\r\nContent-Length: 5\r\n\r\n${body}`, 400],
      ['Content-Length and Transfer-Encoding', `Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`, 411],
      ['Transfer-Encoding identity', `Transfer-Encoding: identity\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 411],
      ['a signed Content-Length', `Content-Length: +${body.length}\r\n\r\n${body}`, 400],
      ['a space before the colon', `Content-Length : ${body.length}\r\n\r\n${body}`, 400],
      ['a folded header', `X-A: b\r\n c\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 400],
      ['a bare LF in a header', `X-A: b\nContent-Length: ${body.length}\r\n\r\n${body}`, 400],
      ['two Host headers', `Host: 127.0.0.2\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 400],
      ['a Content-Length over the limit', `Content-Length: ${8 << 20}\r\n\r\n`, 413],
    ];
    for (const [what, rest, want] of cases) {
      const r = await raw(s.port, head + rest);
      assert.equal(status(r), want, `${what}: ${r.slice(0, 300)}`);
      assert.equal(typeof jsonBody(r).error.message, 'string', what);
      assert.doesNotMatch(r.slice(r.indexOf('\r\n\r\n') + 4), /\n/, `${what}: a one-line JSON error`);
    }
    const ok = await raw(s.port, `${head}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    assert.equal(status(ok), 200, ok);
    const m = await metrics(s.base);
    assert.equal(m.value('nanoinfer_requests_total{status="400"}'), 7);
    assert.equal(m.value('nanoinfer_requests_total{status="411"}'), 2);
    assert.equal(m.value('nanoinfer_requests_total{status="413"}'), 1);
  } finally {
    await s.stop();
  }
});

// ---- --queue over HTTP ---------------------------------------------------------------------------

test('--queue is strict over HTTP: of parallel + queue + 1 requests at once, exactly one gets 503', async () => {
  const s = await startServer(['--parallel', '1', '--queue', '2']);
  try {
    // Greedy from "ROMEO:" this model does not stop within 240 tokens, so the first request
    // holds the one slot for the whole burst (requests arrive within milliseconds).
    const body = JSON.stringify({ prompt: 'ROMEO:', max_tokens: 240, temperature: 0 });
    const responses = await Promise.all(Array.from({ length: 4 }, () => fetch(`${s.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body,
    }).then(async (r) => ({ status: r.status, body: await r.json() }))));
    const statuses = responses.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 200, 200, 503]);
    const refused = responses.find((r) => r.status === 503);
    assert.equal(refused.body.error.code, 'queue_full');
    // The access log names each request's path (a /metrics poll is itself a 200 once answered,
    // so the counter alone cannot say when the four completions are all logged).
    const completions = () => s.stderr().split('\n').filter((l) => / POST \/v1\/completions /.test(l));
    for (let i = 0; i < 300 && completions().length < 4; ++i) await sleep(100);
    assert.equal(completions().filter((l) => /completions 200 /.test(l)).length, 3, s.stderr());
    assert.equal(completions().filter((l) => /completions 503 /.test(l)).length, 1, s.stderr());
    // Counted before its line is logged; this poll itself is counted only after its answer.
    const m = await metrics(s.base);
    assert.equal(m.value('nanoinfer_requests_total{status="503"}'), 1, m.text);
    assert.equal(m.value('nanoinfer_requests_total{status="200"}'), 3, m.text);
  } finally {
    await s.stop();
  }
});

// ---- --host --------------------------------------------------------------------------------------

test('serve --host not-an-ip says what is wrong', () => {
  const r = spawnSync(args.nanoinfer, ['serve', '--port', '0', '--host', 'not-an-ip'], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /^nanoinfer: error: cannot listen on 'not-an-ip': --host must be a numeric IPv4 or IPv6 address[^\n]*\n$/);
  assert.doesNotMatch(r.stderr, /Success/);
});

// ---- access log and CORS -------------------------------------------------------------------------

test('one access-log line per request (client, method, path, status, tokens, seconds); --quiet has none', async () => {
  const s = await startServer();
  try {
    const r = await fetch(`${s.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'ROMEO:', max_tokens: 3, temperature: 0 }),
    });
    const j = await r.json();
    assert.equal(r.status, 200, JSON.stringify(j));
    assert.equal((await fetch(`${s.base}/v1/nowhere`)).status, 404);
    const bad = await fetch(`${s.base}/v1/completions`, { method: 'POST', body: 'x' });
    assert.equal(bad.status, 415);
    // The logger writes after the last byte: give it a moment past the answers.
    for (let i = 0; i < 50 && s.stderr().split('\n').filter((l) => / \/v1\//.test(l)).length < 3; ++i) await sleep(100);
    const lines = s.stderr().split('\n').filter((l) => / \/v1\//.test(l));
    assert.equal(lines.length, 3, s.stderr());
    const { prompt_tokens: pin, completion_tokens: pout } = j.usage;
    // One line each, in the order the responses' logging finished (a request's line can land
    // after the next request's: the client moves on at the last byte).
    const expected = [
      new RegExp(`^nanoinfer: 127\\.0\\.0\\.1 POST /v1/completions 200 tokens ${pin}\\+${pout} \\d+\\.\\d\\d s$`),
      /^nanoinfer: 127\.0\.0\.1 GET \/v1\/nowhere 404 \d+\.\d\d s$/,
      /^nanoinfer: 127\.0\.0\.1 POST \/v1\/completions 415 \d+\.\d\d s$/,
    ];
    for (const re of expected) assert.equal(lines.filter((l) => re.test(l)).length, 1, `${re}: ${s.stderr()}`);
  } finally {
    await s.stop();
  }
  const q = await startServer(['--quiet']);
  try {
    assert.equal((await fetch(`${q.base}/v1/models`)).status, 200);
    await sleep(200);
    assert.doesNotMatch(q.stderr(), /\/v1\/models/);
  } finally {
    await q.stop();
  }
});

test('--cors: allowed origins get the headers and preflights a 204 without the key; others get neither', async () => {
  const key = 'k-cors';
  const s = await startServer(['--quiet', '--cors', 'http://localhost:3000', '--api-key', key]);
  try {
    const pre = await fetch(`${s.base}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { Origin: 'http://localhost:3000', 'Access-Control-Request-Method': 'POST',
                 'Access-Control-Request-Headers': 'authorization,content-type' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), 'http://localhost:3000');
    assert.match(pre.headers.get('access-control-allow-headers'), /Authorization/);
    assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
    // The real request still needs the key; its answer (an error too) carries the header.
    const denied = await fetch(`${s.base}/v1/models`, { headers: { Origin: 'http://localhost:3000' } });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), 'http://localhost:3000');
    const ok = await fetch(`${s.base}/v1/models`, { headers: { Origin: 'http://localhost:3000', Authorization: `Bearer ${key}` } });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), 'http://localhost:3000');
    const foreign = await fetch(`${s.base}/v1/models`, { headers: { Origin: 'http://evil.example', Authorization: `Bearer ${key}` } });
    assert.equal(foreign.status, 200);
    assert.equal(foreign.headers.get('access-control-allow-origin'), null);
  } finally {
    await s.stop();
  }
  // Without --cors a preflight is not answered with CORS headers.
  const plain = await startServer(['--quiet']);
  try {
    const pre = await fetch(`${plain.base}/v1/models`, { method: 'OPTIONS', headers: { Origin: 'http://localhost:3000' } });
    assert.notEqual(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), null);
  } finally {
    await plain.stop();
  }
  const bad = spawnSync(args.nanoinfer, ['serve', '--cors', 'http://x/path'], { encoding: 'utf8' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /^nanoinfer: error: --cors takes/);
});

// ---- the port ------------------------------------------------------------------------------------

test('a port in use is refused in one line; after the server leaves, the port is free at once', async () => {
  const s = await startServer(['--quiet']);
  const port = String(s.port);
  try {
    // A second server on the same port must not start and share it.
    const second = spawnSync(args.nanoinfer, ['serve', '--port', port, '--quiet'], { encoding: 'utf8', timeout: 60000 });
    assert.equal(second.status, 1, second.stderr);
    assert.match(second.stderr, new RegExp(`^nanoinfer: error: cannot listen on 127\\.0\\.0\\.1:${port}: Address already in use\\n$`));
    // Leave connections in TIME_WAIT on the server's side: answered requests closed by it.
    for (let i = 0; i < 3; ++i) {
      const r = await raw(s.port, `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
      assert.equal(status(r), 200);
    }
  } finally {
    await s.stop();
  }
  const again = await startServe(args.nanoinfer, ['--port', port, '--quiet']);
  try {
    assert.equal(again.port, s.port);
    assert.equal((await fetch(`${again.base}/health`)).status, 200);
  } finally {
    await again.stop();
  }
});

// ---- the edges of the CLI and of the head --------------------------------------------------------

test('--cors refuses an origin with CR LF (or any control character) in one line', () => {
  for (const origin of ['http://x\r\nSet-Cookie: a=b', 'http://x\x1b[2J', 'http://a b']) {
    const r = spawnSync(args.nanoinfer, ['serve', '--port', '0', '--cors', origin], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 1, JSON.stringify(origin) + r.stderr);
    assert.match(r.stderr, /^nanoinfer: error: --cors: the origin '[^\n]*' holds a space, a control character[^\n]*\n$/);
  }
});

test('two Authorization headers are refused (400), whichever comes first', async () => {
  const s = await startServer(['--api-key', 'k-dup']);
  try {
    for (const pair of [['Bearer k-dup', 'Bearer nope'], ['Bearer nope', 'Bearer k-dup'], ['Bearer k-dup', 'Bearer k-dup']]) {
      const r = await raw(s.port, `GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${pair[0]}\r\n` +
                                  `Authorization: ${pair[1]}\r\nConnection: close\r\n\r\n`);
      assert.equal(status(r), 400, `${pair}: ${r.slice(0, 200)}`);
      assert.match(jsonBody(r).error.message, /more than one Authorization header/);
    }
    const one = await raw(s.port, 'GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k-dup\r\nConnection: close\r\n\r\n');
    assert.equal(status(one), 200);
  } finally {
    await s.stop();
  }
});

test('the start-up lines say an API key is required, without printing it', async () => {
  const s = await startServer(['--api-key', 'k-start-7f3a']);
  try {
    assert.match(s.stderr(), /^nanoinfer: \/v1\/\* requires an API key/m);
    assert.doesNotMatch(s.stderr(), /k-start-7f3a/);
  } finally {
    await s.stop();
  }
  const open = await startServer();
  try {
    assert.doesNotMatch(open.stderr(), /requires an API key/);
  } finally {
    await open.stop();
  }
});

test('a stream whose client leaves is logged and counted as 499 with the tokens it generated', async () => {
  const s = await startServer(['--parallel', '1']);
  try {
    const before = await metrics(s.base);
    const body = JSON.stringify({ prompt: 'ROMEO:', max_tokens: 240, temperature: 0, stream: true });
    // Read until four events carried text, then leave.
    const events = await new Promise((resolve) => {
      const sock = net.connect(s.port, '127.0.0.1');
      let got = '';
      let done = false;
      sock.on('error', () => {});
      sock.on('close', () => resolve(-1));
      sock.on('data', (d) => {
        got += d;
        const n = (got.match(/"text":"[^"]/g) ?? []).length;
        if (n >= 4 && !done) {
          done = true;
          sock.destroy();
          resolve(n);
        }
      });
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n${json}Content-Length: ${body.length}\r\n\r\n${body}`);
    });
    assert.ok(events >= 4, `the stream ended before four events (${events})`);
    let after;
    for (let waited = 0; waited < 60000; waited += 100) {
      after = await metrics(s.base);
      if (after.value('nanoinfer_requests_total{status="499"}') === 1) break;
      await sleep(100);
    }
    assert.equal(after.value('nanoinfer_requests_total{status="499"}'), 1, after.text);
    const generated = after.value('nanoinfer_completion_tokens_total') - before.value('nanoinfer_completion_tokens_total');
    assert.ok(generated >= events && generated < 240, `generated ${generated}, events ${events}`);
    const line = s.stderr().split('\n').find((l) => / POST \/v1\/completions /.test(l));
    assert.match(line, new RegExp(`^nanoinfer: 127\\.0\\.0\\.1 POST /v1/completions 499 tokens \\d+\\+${generated} \\d+\\.\\d\\d s$`), s.stderr());
  } finally {
    await s.stop();
  }
});

test('sampling values that would overflow at some token are a 400 naming the field, not a 500', async () => {
  const s = await startServer(['--quiet']);
  try {
    for (const [field, value] of [['repetition_penalty', 1e308], ['repetition_penalty', 1e-320], ['temperature', 1e-320]]) {
      const res = await fetch(`${s.api}/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'ROMEO:', max_tokens: 4, [field]: value }),
      });
      const j = await res.json();
      assert.equal(res.status, 400, `${field} ${value}: ${JSON.stringify(j)}`);
      assert.equal(j.error.code, 'invalid_value');
      assert.match(j.error.message, new RegExp(`'${field}'`));
    }
  } finally {
    await s.stop();
  }
});
