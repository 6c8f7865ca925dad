// POST /v1/embeddings with the official `openai` npm client: embeddings.create as a client
// calls it (the client asks for base64 by default and decodes it), float and base64 equal,
// batches equal to single requests, dimensions, the values equal to `nanoinfer embed`'s, the
// --pooling flag, and refusals (raw fetch for what the client would not send). The default
// model (a generation model, no pooling metadata: last-token pooling). Run by CTest
// (`serve_embeddings`):
//
//   node tests/serve/embeddings.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/serve-test
//
// Exits 77 (skipped) when the openai package or the default model is missing.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { serveTestWithPackages, startServe } from './serve_process.mjs';

const { args, root, OpenAI } = serveTestWithPackages('embeddings');
const hidden = JSON.parse(fs.readFileSync(path.join(root, 'data/default-model/config.json'), 'utf8')).hidden_size;

let server;
let client;
let api;

before(async () => {
  server = await startServe(args.nanoinfer, ['--parallel', '2']);
  api = server.api;
  client = new OpenAI({ baseURL: api, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  if (server) assert.deepEqual(await server.stop(), { code: 0, signal: null });
});

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

async function post(body) {
  const r = await fetch(`${api}/embeddings`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

test('embeddings.create: base64 by default, equal to float, unit length', async () => {
  const b64 = await client.embeddings.create({ model: 'default-model', input: 'ROMEO:' });
  assert.equal(b64.object, 'list');
  assert.equal(b64.data.length, 1);
  assert.equal(b64.data[0].index, 0);
  assert.equal(b64.data[0].embedding.length, hidden);
  assert.ok(Math.abs(norm(b64.data[0].embedding) - 1) < 1e-5);
  assert.ok(b64.usage.prompt_tokens > 0);
  assert.equal(b64.usage.total_tokens, b64.usage.prompt_tokens);
  const flt = await client.embeddings.create({ input: 'ROMEO:', encoding_format: 'float' });
  // The JSON numbers are float32 values printed to round-trip: rounding them back gives the bytes.
  assert.deepEqual(flt.data[0].embedding.map(Math.fround), b64.data[0].embedding);
});

test('a batch equals its inputs sent alone, in order', async () => {
  const texts = ['ROMEO:', 'JULIET: O Romeo, Romeo!', 'To be'];
  const batch = await client.embeddings.create({ input: texts, encoding_format: 'float' });
  assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);
  let tokens = 0;
  for (let i = 0; i < texts.length; i++) {
    const alone = await client.embeddings.create({ input: texts[i], encoding_format: 'float' });
    assert.deepEqual(batch.data[i].embedding, alone.data[0].embedding);
    tokens += alone.usage.prompt_tokens;
  }
  assert.equal(batch.usage.prompt_tokens, tokens);
});

test('dimensions keeps the first components, normalised again', async () => {
  const full = (await client.embeddings.create({ input: 'ROMEO:', encoding_format: 'float' })).data[0].embedding;
  const cut = (await client.embeddings.create({ input: 'ROMEO:', dimensions: 16 })).data[0].embedding;
  assert.equal(cut.length, 16);
  const scale = norm(full.slice(0, 16));
  cut.forEach((v, d) => assert.ok(Math.abs(v - full[d] / scale) < 1e-6, `component ${d}`));
});

test('the server and `nanoinfer embed` give the same numbers', async () => {
  const served = (await client.embeddings.create({ input: 'JULIET:', encoding_format: 'float' })).data[0].embedding;
  const out = execFileSync(args.nanoinfer, ['embed', '-p', 'JULIET:'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  assert.deepEqual(JSON.parse(out).embedding, served);
});

test('bad requests get 400 (404 for another model) with OpenAI error objects', async () => {
  await assert.rejects(client.embeddings.create({ input: '' }), (e) => e.status === 400);
  const cases = [
    [{ input: [] }, 400, 'invalid_value'],
    [{ input: 'a', encoding_format: 'hex' }, 400, 'invalid_value'],
    [{ input: 'a', dimensions: 0 }, 400, 'invalid_value'],
    [{ input: 'a', dimensions: hidden + 1 }, 400, 'invalid_value'],
    [{ input: [[1, 2], 'a', 7] }, 400, 'invalid_value'],
    [{ input: 'a', model: 'another' }, 404, 'model_not_found'],
    [{ input: ['a', 'ROMEO: '.repeat(400)] }, 400, 'context_length_exceeded'],
  ];
  for (const [body, status, code] of cases) {
    const r = await post(body);
    assert.equal(r.status, status, JSON.stringify(body));
    assert.equal(r.body.error.code, code, JSON.stringify(body));
    assert.equal(r.body.error.type, 'invalid_request_error');
  }
  assert.match((await post({ input: ['a', 'ROMEO: '.repeat(400)] })).body.error.message, /^'input' 1 is \d+ tokens/);
});

test('--pooling mean changes the pooling; a bad one is refused at start', async () => {
  const last = (await client.embeddings.create({ input: 'ROMEO: hello', encoding_format: 'float' })).data[0].embedding;
  const mean = await startServe(args.nanoinfer, ['--pooling', 'mean']);
  try {
    const c = new OpenAI({ baseURL: mean.api, apiKey: 'unused', maxRetries: 0 });
    const e = (await c.embeddings.create({ input: 'ROMEO: hello', encoding_format: 'float' })).data[0].embedding;
    assert.equal(e.length, hidden);
    assert.notDeepEqual(e, last);
  } finally {
    await mean.stop();
  }
  await assert.rejects(startServe(args.nanoinfer, ['--pooling', 'max']), /pooling 'max': expected mean, cls/);
});
