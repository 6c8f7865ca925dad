// The official `openai` client's embeddings against `nanoinfer serve` (/v1/embeddings), checked
// for OpenAI's response shape: one float array per input, all of one length, in input order,
// unit L2 norm; base64 (the client's default wire format) decoding to the same floats as
// encoding_format float within 1e-6; a single string as one input. The model is tests/apps'
// synthetic Qwen2 (apps_common.mjs). Run by CTest (`apps_embeddings`):
//
//   node tests/apps/embeddings.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/apps-test \
//     --tokenizer .deps/qwen-tokenizer
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MODEL_ID, appTest, recordingFetch, serveForTests } from './apps_common.mjs';

const { args, require } = appTest('embeddings', ['openai']);
const { OpenAI } = require('openai');

const server = serveForTests(args);

const inputs = ['The cat sat on the mat.', 'Quantum chromodynamics', 'The cat sat on the mat!'];

function norm(v) {
  return Math.sqrt(v.reduce((s, x) => s + x * x, 0));
}

test('float embeddings: OpenAI\'s shape, in input order, unit norm', async () => {
  const client = new OpenAI({ baseURL: server.api, apiKey: 'none', maxRetries: 0 });
  const res = await client.embeddings.create({ model: MODEL_ID, input: inputs, encoding_format: 'float' });
  assert.equal(res.object, 'list');
  assert.equal(res.model, MODEL_ID);
  assert.equal(res.data.length, inputs.length);
  const dim = res.data[0].embedding.length;
  assert.ok(dim > 0);
  res.data.forEach((d, i) => {
    assert.equal(d.object, 'embedding');
    assert.equal(d.index, i);
    assert.equal(d.embedding.length, dim);
    assert.ok(d.embedding.every((x) => typeof x === 'number' && Number.isFinite(x)));
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-4, `norm of ${i}: ${norm(d.embedding)}`);
  });
  assert.notDeepEqual(res.data[0].embedding, res.data[1].embedding);
  assert.ok(res.usage.prompt_tokens > 0);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens);
  // One string is one input; the same text embeds the same.
  const one = await client.embeddings.create({ model: MODEL_ID, input: inputs[1], encoding_format: 'float' });
  assert.equal(one.data.length, 1);
  one.data[0].embedding.forEach((x, j) => assert.ok(Math.abs(x - res.data[1].embedding[j]) < 1e-6));
});

test('base64 embeddings decode to the float ones within 1e-6', async () => {
  const recorder = recordingFetch();
  const client = new OpenAI({ baseURL: server.api, apiKey: 'none', maxRetries: 0, fetch: recorder.fetch });
  const floats = await client.embeddings.create({ model: MODEL_ID, input: inputs, encoding_format: 'float' });
  // Without encoding_format the client asks for base64 and decodes it itself.
  const decoded = await client.embeddings.create({ model: MODEL_ID, input: inputs });
  assert.equal(recorder.bodies[1].body.encoding_format, 'base64');
  // The raw base64, decoded here as little-endian float32.
  const raw = await (await fetch(`${server.api}/embeddings`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: MODEL_ID, input: inputs, encoding_format: 'base64' }),
  })).json();
  for (let i = 0; i < inputs.length; ++i) {
    const expected = floats.data[i].embedding;
    assert.equal(typeof raw.data[i].embedding, 'string');
    const bytes = Buffer.from(raw.data[i].embedding, 'base64');
    assert.equal(bytes.length, 4 * expected.length);
    const mine = Array.from({ length: expected.length }, (_, j) => bytes.readFloatLE(4 * j));
    assert.equal(raw.data[i].index, i);
    assert.equal(decoded.data[i].embedding.length, expected.length);
    for (let j = 0; j < expected.length; ++j) {
      assert.ok(Math.abs(mine[j] - expected[j]) <= 1e-6, `input ${i} [${j}]: ${mine[j]} vs ${expected[j]}`);
      assert.ok(Math.abs(decoded.data[i].embedding[j] - expected[j]) <= 1e-6);
    }
  }
});
