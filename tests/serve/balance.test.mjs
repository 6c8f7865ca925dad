// Two `nanoinfer serve` replicas behind HAProxy with docs/haproxy.cfg (docs/SERVING.md,
// "Serving past one machine"): concurrent streaming clients through the proxy get their events
// as they are generated, both replicas take requests, and after one replica is killed mid-run
// new requests keep succeeding on the other. The config is the documented file with only its ports
// replaced. Run by CTest (test `serve_balance`; exit 77 = skipped when haproxy is missing):
//
//   node tests/serve/balance.test.mjs --nanoinfer build/release/nanoinfer
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from './serve_process.mjs';

const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' } } });
if (!args.nanoinfer) {
  console.error('usage: balance.test.mjs --nanoinfer BINARY');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) {
  console.log('serve_balance: skipped: data/default-model is missing');
  process.exit(77);
}
const haproxy = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => fs.existsSync(p));
if (!haproxy) {
  console.log('serve_balance: skipped: haproxy not found (run scripts/install-deps.sh)');
  process.exit(77);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function freePort() {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const startReplica = () => startServe(args.nanoinfer, ['--quiet', '--parallel', '4']);

// Requests a replica routed to its model (the proxy's health checks and these /metrics polls are
// 200s too, so the count of answers by status would not say who generated).
async function completions(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^nanoinfer_model_requests_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

// A streamed chat completion through the proxy; resolves with its status, the number of
// separate reads the body arrived in, the events and whether it ended with [DONE].
// `onData` is called at the first read of the body.
async function stream(base, i, completion = null, onData = () => {}) {
  const request = completion
    ? { ...completion, stream: true, temperature: 0 }
    : { messages: [{ role: 'user', content: `Tell me about ${i}.` }], max_tokens: 24, stream: true, temperature: 0 };
  const res = await fetch(`${base}/v1/${completion ? 'completions' : 'chat/completions'}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(request),
    signal: AbortSignal.timeout(120000),
  });
  if (res.status !== 200) return { status: res.status, reads: 0, events: 0, done: false };
  let reads = 0;
  let body = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    if (reads === 0) onData();
    ++reads;
    body += decoder.decode(chunk, { stream: true });
  }
  const events = body.split('\n\n').filter((e) => e.startsWith('data: '));
  return { status: 200, reads, events: events.length, done: body.includes('data: [DONE]') };
}

test('two replicas behind haproxy: streams pass unbuffered, both serve, one dies and requests keep succeeding', { timeout: 300000 }, async () => {
  const r1 = await startReplica();
  const r2 = await startReplica();
  const front = await freePort();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-balance-'));
  let lb;
  try {
    // The documented config, with the test's ports.
    const documented = fs.readFileSync(path.join(root, 'docs/haproxy.cfg'), 'utf8');
    assert.match(documented, /^    bind 127\.0\.0\.1:8080$/m);
    assert.match(documented, /^    server replica1 127\.0\.0\.1:8081$/m);
    assert.match(documented, /^    server replica2 127\.0\.0\.1:8082$/m);
    const cfg = documented.replace(/^    bind 127\.0\.0\.1:8080$/m, `    bind 127.0.0.1:${front}`)
      .replace(/^    server replica1 127\.0\.0\.1:8081$/m, `    server replica1 127.0.0.1:${r1.port}`)
      .replace(/^    server replica2 127\.0\.0\.1:8082$/m, `    server replica2 127.0.0.1:${r2.port}`);
    fs.writeFileSync(path.join(tmp, 'haproxy.cfg'), cfg);
    const check = spawnSync(haproxy, ['-c', '-f', path.join(tmp, 'haproxy.cfg')], { encoding: 'utf8' });
    assert.equal(check.status, 0, check.stdout + check.stderr);
    lb = spawn(haproxy, ['-db', '-f', path.join(tmp, 'haproxy.cfg')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let lbErr = '';
    lb.stderr.on('data', (d) => { lbErr += d; });
    const base = `http://127.0.0.1:${front}`;
    // Ready when the proxy answers /health (through a replica whose check passed).
    for (let i = 0; ; ++i) {
      try {
        if ((await fetch(`${base}/health`)).status === 200) break;
      } catch {}
      assert.ok(i < 100, `haproxy never answered: ${lbErr}`);
      await sleep(100);
    }

    // 8 concurrent streams, all complete; least-connections gives both replicas some.
    const before = [await completions(r1.base), await completions(r2.base)];
    const first = await Promise.all(Array.from({ length: 8 }, (_, i) => stream(base, i)));
    for (const s of first) {
      assert.equal(s.status, 200);
      assert.ok(s.done, JSON.stringify(s));
      assert.ok(s.events >= 3, JSON.stringify(s));
    }
    const served = [(await completions(r1.base)) - before[0], (await completions(r2.base)) - before[1]];
    assert.equal(served[0] + served[1], 8, `streams per replica: ${served}`);
    assert.ok(served[0] > 0 && served[1] > 0, `streams per replica: ${served}`);

    // Unbuffered: a 200-token stream comes through in many reads, as its events are written
    // (about 60-110 reads here, direct or through this config). Without `option http-no-delay`
    // HAProxy coalesced the same streams into 2 or 3 reads.
    let mostReads = 0;
    for (let i = 0; i < 3; ++i) {
      const s = await stream(base, 50 + i, { prompt: 'Once upon a time', max_tokens: 200 });
      assert.equal(s.status, 200);
      assert.ok(s.done, JSON.stringify(s));
      mostReads = Math.max(mostReads, s.reads);
    }
    assert.ok(mostReads >= 10, `200-token streams came in at most ${mostReads} reads: coalesced by the proxy?`);

    // Kill one replica while streams are running; the new requests after it must all succeed.
    // The replica is stopped (SIGSTOP) the moment the first stream's first bytes arrive: the
    // four requests were sent together, so by then the proxy has passed some to it, and those
    // cannot end before the kill (a fixed delay raced them: 200 tokens of the default model
    // take ~30 ms on a fast machine). "after" starts once the replica has exited: a request
    // sent between kill() and the exit may reach the dying process and be cut like these.
    const exited = new Promise((resolve) => r1.proc.once('exit', resolve));
    let stopped = false;
    const stop = () => {
      if (!stopped) r1.proc.kill('SIGSTOP');
      stopped = true;
    };
    const during = Array.from({ length: 4 }, (_, i) => stream(base, 100 + i, { prompt: `Story ${i}:`, max_tokens: 200 }, stop));
    const settled = Promise.allSettled(during);  // the ones on the stopped replica are cut, as expected
    for (let waited = 0; !stopped && waited < 60000; waited += 5) await sleep(5);
    assert.ok(stopped, 'no stream started within a minute');
    r1.proc.kill('SIGKILL');
    await exited;
    const cut = (await settled).filter((r) => r.status === 'rejected' || !r.value.done).length;
    assert.ok(cut > 0, 'no stream was running on the killed replica: the kill tested nothing');
    const after = [];
    for (let round = 0; round < 3; ++round) {
      after.push(...await Promise.all(Array.from({ length: 4 }, (_, i) => stream(base, 200 + round * 4 + i))));
    }
    for (const s of after) {
      assert.equal(s.status, 200, JSON.stringify(s));
      assert.ok(s.done, JSON.stringify(s));
    }
  } finally {
    lb?.kill('SIGTERM');
    r1.proc.kill('SIGKILL');
    r2.proc.kill('SIGTERM');
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
