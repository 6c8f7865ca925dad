// Several models behind one `nanoinfer serve`: the default model (data/default-model, id
// "default-model") and a synthetic one of the same shape with random weights (id "synth-b").
// Each request is answered by the model it names, greedy text equal to a server of that model
// alone; /v1/models says which are loaded; under --max-loaded 1 a request for the other model
// waits for a running stream to end (never unloading its model under it) and the access log
// says it waited; an unknown model is a 404 naming the known ones. Run by CTest (test
// `serve_multimodel`):
//
//   node tests/serve/multimodel.test.mjs --nanoinfer build/release/nanoinfer
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when the default model is missing.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from './serve_process.mjs';

const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' } } });
if (!args.nanoinfer) {
  console.error('usage: multimodel.test.mjs --nanoinfer BINARY');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const modelA = path.join(root, 'data/default-model');
if (!fs.existsSync(path.join(modelA, 'model.safetensors'))) {
  console.log('serve_multimodel: skipped: data/default-model is missing');
  process.exit(77);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const PROMPTS = ['ROMEO:', 'To be or not', 'First Citizen:\nWe are', 'The king'];
const A = 'default-model';
const B = 'synth-b';

let dir;
let modelB;
const reference = new Map();  // `${model} ${prompt} ${max_tokens}` -> greedy text of the model served alone

// The default model's shape with seeded random weights, over its tokenizer.
function synthModel() {
  const cfgDir = path.join(dir, 'cfg');
  fs.mkdirSync(cfgDir);
  fs.mkdirSync(path.join(dir, 'models'));
  fs.copyFileSync(path.join(modelA, 'config.json'), path.join(cfgDir, 'config.json'));
  const out = path.join(dir, 'models', B);
  const r = spawnSync(args.nanoinfer, ['synth', '--config', path.join(cfgDir, 'config.json'), '--out', out], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  for (const f of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json']) {
    fs.copyFileSync(path.join(modelA, f), path.join(out, f));
  }
  return out;
}

async function complete(s, body) {
  const res = await fetch(`${s.api}/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ temperature: 0, ...body }),
  });
  return { status: res.status, json: await res.json(), at: performance.now() };
}

async function models(s) {
  const j = await (await fetch(`${s.api}/models`)).json();
  return j.data.map((m) => [m.id, m.loaded, m.object, m.owned_by, typeof m.created]);
}

// The access-log lines (stderr lines after the start-up ones) once `count` have been written.
// The access log's lines (those matching `only`, when given), once there are `count` of them.
async function logLines(s, count, only = /./) {
  const lines = () => s.stderr().split('\n').filter((l) => /^nanoinfer: 127\.0\.0\.1 /.test(l) && only.test(l));
  for (let i = 0; i < 300 && lines().length < count; ++i) await sleep(20);
  return lines();
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-multimodel-'));
  modelB = synthModel();
  // The greedy references: each model served alone.
  for (const [id, model] of [[A, modelA], [B, modelB]]) {
    const s = await startServe(args.nanoinfer, ['-m', model, '-t', '1', '--quiet']);
    try {
      for (const prompt of PROMPTS) {
        for (const max_tokens of [16, 200]) {
          const r = await complete(s, { prompt, max_tokens });
          assert.equal(r.status, 200, JSON.stringify(r.json));
          assert.equal(r.json.model, id);
          reference.set(`${id} ${prompt} ${max_tokens}`, r.json.choices[0].text);
        }
      }
    } finally {
      await s.stop();
    }
  }
  // The two models must answer differently, or the routing tests below could not fail.
  for (const prompt of PROMPTS) assert.notEqual(reference.get(`${A} ${prompt} 16`), reference.get(`${B} ${prompt} 16`));
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('interleaved requests are each answered by the model they name; /v1/models says which are loaded', async () => {
  const s = await startServe(args.nanoinfer, ['-m', modelA, '-m', modelB, '-t', '1', '--parallel', '2']);
  try {
    // The default model loads at start, the other on first use.
    assert.deepEqual(await models(s), [[A, true, 'model', 'nanoinfer', 'number'], [B, false, 'model', 'nanoinfer', 'number']]);
    const sent = [];
    for (const prompt of PROMPTS) {
      for (const model of [A, B]) sent.push({ model, prompt, reply: complete(s, { model, prompt, max_tokens: 16 }) });
    }
    // No model named: the default.
    sent.push({ model: A, prompt: PROMPTS[0], reply: complete(s, { prompt: PROMPTS[0], max_tokens: 16 }) });
    for (const { model, prompt, reply } of sent) {
      const r = await reply;
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.model, model);
      assert.equal(r.json.choices[0].text, reference.get(`${model} ${prompt} 16`), `${model} on ${JSON.stringify(prompt)}`);
    }
    assert.deepEqual((await models(s)).map((m) => m.slice(0, 2)), [[A, true], [B, true]]);

    const unknown = await complete(s, { model: 'nope', prompt: 'x', max_tokens: 1 });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, 'model_not_found');
    assert.equal(unknown.json.error.message, "the model 'nope' does not exist; this server has 'default-model', 'synth-b'");

    const lines = await logLines(s, sent.length + 1);
    assert.equal(lines.filter((l) => / 200 .* model default-model( |$)/.test(l)).length, PROMPTS.length + 1, lines.join('\n'));
    assert.equal(lines.filter((l) => / 200 .* model synth-b( |$)/.test(l)).length, PROMPTS.length, lines.join('\n'));
    assert.match(s.stderr(), /^nanoinfer: serving 'synth-b' too \(.*synth-b; loaded on first use\)$/m);
    const metrics = await (await fetch(`${s.base}/metrics`)).text();
    assert.match(metrics, /^nanoinfer_model_requests_total\{model="default-model"\} 5$/m);
    assert.match(metrics, /^nanoinfer_model_requests_total\{model="synth-b"\} 4$/m);
    assert.match(metrics, /^nanoinfer_model_loads_total\{model="synth-b"\} 1$/m);
    assert.match(metrics, /^nanoinfer_model_unloads_total\{model="default-model"\} 0$/m);
  } finally {
    await s.stop();
  }
});

// Reads an SSE completion stream to its end; resolves with its text, its finish reason and the
// time its [DONE] arrived. `onFirst` (if any) runs when the first text arrives.
async function stream(s, body, onFirst) {
  const res = await fetch(`${s.api}/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ temperature: 0, stream: true, ...body }),
  });
  assert.equal(res.status, 200);
  const decoder = new TextDecoder();
  let buffer = '';
  let text = '';
  let finish = null;
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end).replace(/^data: /, '');
      buffer = buffer.slice(end + 2);
      if (event === '[DONE]') return { text, finish, done: performance.now() };
      const j = JSON.parse(event);
      assert.ok(!j.error, event);
      if (text === '' && j.choices[0].text !== '' && onFirst) onFirst();
      text += j.choices[0].text;
      finish = j.choices[0].finish_reason ?? finish;
    }
  }
  throw new Error(`the stream ended without [DONE] after ${JSON.stringify(text)}`);
}

test('--max-loaded 1: a request for the other model waits for the running streams, then its model loads', async () => {
  // One sequence at a time: the streams on a run one after the other, each holding a loaded.
  // The tiny model can finish all four streams before the client, under load, gets b's request
  // out; such a round shows nothing and is run again on a fresh server (at most 8 rounds).
  let raced = 0;
  for (;;) {
    const s = await startServe(args.nanoinfer, ['-m', modelA, '-m', modelB, '-t', '1', '--max-loaded', '1', '--parallel', '1']);
    try {
      assert.match(s.stderr(), /^nanoinfer: at most 1 model\(s\) loaded at once/m);
      let second;
      let sentAt;
      // Once a stream runs on a with another queued behind it, b is asked for. (Not all four: on
      // a fast machine the tiny model can finish the first stream before the last one arrives.)
      const sendB = async () => {
        const active = /^nanoinfer_model_active_requests\{model="default-model"\} (\d+)$/m;
        for (let i = 0; i < 500; ++i) {
          const metrics = await (await fetch(`${s.base}/metrics`)).text();
          if (Number(metrics.match(active)?.[1] ?? 0) >= 2) break;
          await sleep(2);
        }
        sentAt = performance.now();
        return complete(s, { model: B, prompt: PROMPTS[1], max_tokens: 16 });
      };
      const streams = PROMPTS.map((prompt, i) => stream(s, { model: A, prompt, max_tokens: 200 }, i > 0 ? null : () => {
        second = sendB();
      }));
      const firsts = await Promise.all(streams);
      const b = await second;
      // No stream on a was cut: each is the whole greedy text of the model alone.
      PROMPTS.forEach((prompt, i) => assert.equal(firsts[i].text, reference.get(`${A} ${prompt} 200`), prompt));
      const lastDone = Math.max(...firsts.map((f) => f.done));
      if (sentAt >= lastDone && ++raced < 8) continue;
      assert.ok(sentAt < lastDone, 'the request for b was sent while a streamed');
      assert.ok(b.at > lastDone, 'b answered after every stream on a ended');
      assert.equal(b.status, 200, JSON.stringify(b.json));
      assert.equal(b.json.model, B);
      assert.equal(b.json.choices[0].text, reference.get(`${B} ${PROMPTS[1]} 16`));
      assert.deepEqual((await models(s)).map((m) => m.slice(0, 2)), [[A, false], [B, true]]);

      const lines = await logLines(s, PROMPTS.length + 1, / POST /);
      assert.equal(lines.length, PROMPTS.length + 1, lines.join('\n'));
      for (const l of lines.slice(0, -1)) assert.match(l, / 200 tokens \d+\+\d+ \d+\.\d\d s model default-model$/);
      const wait = lines.at(-1).match(/ 200 tokens \d+\+16 \d+\.\d\d s model synth-b load_wait_ms (\d+)$/);
      assert.ok(wait, lines.at(-1));
      assert.match(s.stderr(), /^nanoinfer: unloading 'default-model' to load 'synth-b' \(--max-loaded 1\)$/m);
      assert.match(s.stderr(), /^nanoinfer: loaded 'synth-b' \(/m);

      // And back: a loads again (b idle, unloaded), answering as before.
      const again = await complete(s, { model: A, prompt: PROMPTS[1], max_tokens: 16 });
      assert.equal(again.json.choices[0].text, reference.get(`${A} ${PROMPTS[1]} 16`));
      const metrics = await (await fetch(`${s.base}/metrics`)).text();
      assert.match(metrics, /^nanoinfer_model_loads_total\{model="default-model"\} 2$/m);
      assert.match(metrics, /^nanoinfer_model_unloads_total\{model="default-model"\} 1$/m);
      assert.match(metrics, /^nanoinfer_model_unloads_total\{model="synth-b"\} 1$/m);
      assert.match(metrics, /^nanoinfer_model_loaded\{model="synth-b"\} 0$/m);
    } finally {
      await s.stop();
    }
    break;
  }
});

test('bad model lists are one-line errors before anything loads', () => {
  const run = (extra) => spawnSync(args.nanoinfer, ['serve', '--port', '0', ...extra], { encoding: 'utf8', timeout: 60000 });
  const missing = run(['-m', modelA, '-m', path.join(dir, 'absent')]);
  assert.equal(missing.status, 1);
  assert.equal(missing.stderr, `nanoinfer: error: -m ${path.join(dir, 'absent')}: no such file or directory\n`);
  const ids = run(['-m', modelA, '--model-id', 'x', '--model-id', 'y']);
  assert.equal(ids.status, 1);
  assert.match(ids.stderr, /^nanoinfer: error: 2 --model-id values for 1 model\(s\)/);
  const twice = run(['-m', modelA, '-m', modelA]);
  assert.equal(twice.status, 1);
  assert.match(twice.stderr, /nanoinfer: error: two served models are named 'default-model': give each its own id \(--model-id\)\n$/);
  const empty = run(['--models-dir', path.join(dir, 'cfg')]);
  assert.equal(empty.status, 1);
  assert.match(empty.stderr, /--models-dir .*cfg: no model in it/);
});

// With prompt lookup, which every model loaded on demand gets too: greedy text is unchanged.
test('--models-dir serves each model in it, named by its directory', async () => {
  const s = await startServe(args.nanoinfer, ['-m', modelA, '--models-dir', path.join(dir, 'models'), '-t', '1', '--quiet',
                                              '--lookup', '3']);
  try {
    assert.deepEqual((await models(s)).map((m) => m.slice(0, 2)), [[A, true], [B, false]]);
    for (const model of [B, A]) {
      const r = await complete(s, { model, prompt: PROMPTS[2], max_tokens: 200 });
      assert.equal(r.json.choices[0].text, reference.get(`${model} ${PROMPTS[2]} 200`), model);
    }
    const metrics = await (await fetch(`${s.base}/metrics`)).text();
    assert.match(metrics, /^nanoinfer_draft_tokens_total [1-9]\d*$/m);
  } finally {
    await s.stop();
  }
});
