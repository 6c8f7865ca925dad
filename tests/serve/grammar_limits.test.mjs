// `nanoinfer serve` against grammars built to hurt it: a chain of rules deep enough to overflow
// any recursion, a schema whose compile exceeds the work budget, a client that leaves during a
// long compile, SIGTERM during one, and many large compiles at once (the memory they leave).
// Run by CTest (test `serve_grammar_limits`):
//
//   node tests/serve/grammar_limits.test.mjs --nanoinfer build/release/nanoinfer
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when the default model is missing. Waits
// are bounded deadlines (generous: the machine may be loaded); work is counted in CPU time of
// the server process, never in wall-clock assertions on speed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from './serve_process.mjs';

const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' } } });
if (!args.nanoinfer) {
  console.error('usage: grammar_limits.test.mjs --nanoinfer BINARY');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) {
  console.log('serve_grammar_limits: skipped: data/default-model is missing');
  process.exit(77);
}
const sanitized = Boolean(process.env.NANOINFER_SANITIZED);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// CPU seconds the process has used (user + system), from /proc/PID/stat.
function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime, stime in clock ticks (100 Hz)
}
function rssMb(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return Number(m[1]) / 1024;
}

async function complete(base, extra) {
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'ROMEO:', max_tokens: 4, temperature: 0, ...extra }),
  });
  return { status: res.status, body: await res.json() };
}

// A pattern whose parses multiply with every letter: ~1e9 steps (~60 s) to compile and probe,
// far past the default budget of 64e6.
const slowSchema = { type: 'string', pattern: '^([a-z]*[0-9]*){1,2000}$' };
const slowBody = JSON.stringify({
  prompt: 'ROMEO:', max_tokens: 4,
  response_format: { type: 'json_schema', json_schema: { name: 's', schema: slowSchema } },
});

test('a chain of 50,001 rules compiles and constrains the output; the server lives on', async () => {
  const s = await startServe(args.nanoinfer);
  try {
    let grammar = 'root ::= r0\n';
    for (let i = 0; i < 50000; i++) grammar += `r${i} ::= r${i + 1}\n`;
    grammar += 'r50000 ::= "z"\n';
    const r = await complete(s.base, { grammar });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.choices[0].text, 'z');
    // A schema $ref chain: each reference's rule is written from a work list.
    const defs = {};
    for (let i = 0; i < 20000; i++) defs[`d${i}`] = { $ref: `#/$defs/d${i + 1}` };
    defs.d20000 = { const: 'ok' };
    const schema = { $ref: '#/$defs/d0', $defs: defs };
    const r2 = await complete(s.base, { response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
    assert.equal(r2.status, 200, JSON.stringify(r2.body));
    assert.equal(r2.body.choices[0].text, '"ok"');
    assert.equal((await fetch(`${s.base}/health`)).status, 200);
  } finally {
    await s.stop();
  }
});

test('a schema past the compile budget is a 400 naming it; "grammar": "" is a 400', async () => {
  const s = await startServe(args.nanoinfer);
  try {
    const r = await complete(s.base, { response_format: { type: 'json_schema', json_schema: { name: 's', schema: slowSchema } } });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'invalid_schema');
    assert.match(r.body.error.message, /more than 64000000 steps of work/);
    const empty = await complete(s.base, { grammar: '' });
    assert.equal(empty.status, 400);
    assert.match(empty.body.error.message, /'grammar' is empty/);
    // An ambiguity that explodes within a few bytes is found before the response starts, also
    // when streaming (a 400, not an error event after a 200).
    const res = await fetch(`${s.base}/v1/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'x', stream: true, grammar: 'root ::= "a" root "b" | "a" root "c" | ""\n' }),
    });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /too ambiguous/);
  } finally {
    await s.stop();
  }
});

test('a client that leaves during a long compile cancels it', async () => {
  const s = await startServe(args.nanoinfer, ['--grammar-steps', '1000000000000']);
  try {
    const pid = s.proc.pid;
    await new Promise((resolve) => {
      const sock = net.connect(s.port, '127.0.0.1');
      sock.on('error', () => {});
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
                 `Content-Length: ${slowBody.length}\r\n\r\n${slowBody}`);
      setTimeout(() => { sock.destroy(); resolve(); }, 1500);
    });
    // Cancellation is asked every 2^16 steps (a few ms); allow a generous second to notice,
    // then the process must be idle: under 0.5 CPU-s over the next 3 s (it was compiling at
    // 1 CPU-s a second, for a minute).
    await sleep(1000);
    const before = cpuSeconds(pid);
    await sleep(3000);
    const used = cpuSeconds(pid) - before;
    assert.ok(used < 0.5, `the server used ${used} CPU-s after the client left`);
    assert.match(s.stderr(), /POST \/v1\/completions 499/);
  } finally {
    await s.stop();
  }
});

test('SIGTERM during a long compile ends the server cleanly within seconds', async () => {
  const s = await startServe(args.nanoinfer, ['--grammar-steps', '1000000000000']);
  const pending = fetch(`${s.base}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: slowBody,
  }).catch(() => null);
  await sleep(1500);
  const sent = Date.now();
  const exit = await s.stop();
  const took = (Date.now() - sent) / 1000;
  await pending;
  // The compile notices the stop within a few ms; 5 s is the watchdog's limit, after which it
  // exits 1 saying so. A clean stop is exit 0 well before.
  assert.equal(exit.code, 0, `exit ${JSON.stringify(exit)} after ${took} s: ${s.stderr()}`);
  assert.ok(took < 5, `stopping took ${took} s`);
  assert.doesNotMatch(s.stderr(), /exiting now/);
});

test('many large compiles at once leave the resident memory within its bound', { skip: sanitized && 'ASan holds freed memory in its quarantine' }, async () => {
  const s = await startServe(args.nanoinfer, ['--parallel', '1', '--queue', '32']);
  try {
    const pid = s.proc.pid;
    // An enum of 30,000 strings: each compile's syntax tree and rules are ~40 MB while it runs.
    const values = Array.from({ length: 30000 }, (_, i) => `${i.toString(36)}-value`);
    const body = JSON.stringify({
      prompt: 'ROMEO:', max_tokens: 1,
      response_format: { type: 'json_schema', json_schema: { name: 's', schema: { enum: values } } },
    });
    const base = rssMb(pid);
    const results = await Promise.all(Array.from({ length: 24 }, () => fetch(`${s.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body,
    }).then((r) => r.status)));
    assert.deepEqual(new Set(results), new Set([200]));
    const after = rssMb(pid);
    // docs/SERVING.md: two compiles at a time, each handing its freed memory back: what stays
    // is the model's working set, not 24 threads' arenas (24 x ~110 MB before).
    assert.ok(after - base < 300, `resident memory grew by ${after - base} MB (from ${base} MB)`);
  } finally {
    await s.stop();
  }
});
