// The request/response protocol of `nanoinfer serve` through the official `openai` npm client:
// streamed logprobs that carry their chunk's text (chunk by chunk, in bytes), GET
// /v1/models/{id}, the field table (unknown fields refused, vendor fields accepted, OpenAI's
// ranges), the prompt forms of /v1/completions, random response ids, a stream the client
// cuts (logged and counted 499 with its tokens), and a reasoning model: Qwen3's template on a
// synthetic Qwen3 (random weights, Qwen3's tokenizer) whose think block becomes
// reasoning_content, streamed and not, with enable_thinking and --reasoning. Run by CTest
// (`serve_protocol`):
//
//   node tests/serve/protocol.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/serve-test
//
// Exits 77 (skipped) when the openai package or the default model is missing; the Qwen3 part
// is skipped, saying so, without .deps/qwen3-tokenizer.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { serveTestWithPackages, startServe } from './serve_process.mjs';

const { args, root, OpenAI } = serveTestWithPackages('protocol');

let s;  // the default model's server
let client;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-protocol-'));

// The default model with room for long generations (its config allows 256 positions; RoPE is
// defined at any position), so a stream lasts long enough for its client to leave during it.
function roomyDefaultModel() {
  const src = path.join(root, 'data/default-model');
  const dir = path.join(tmp, 'default-model');
  fs.mkdirSync(dir);
  for (const name of fs.readdirSync(src)) {
    if (name !== 'config.json') fs.symlinkSync(path.join(src, name), path.join(dir, name));
  }
  const config = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8'));
  config.max_position_embeddings = 4096;
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  return dir;
}

before(async () => {
  s = await startServe(args.nanoinfer, ['-m', roomyDefaultModel(), '--parallel', '2']);
  client = new OpenAI({ baseURL: s.api, apiKey: 'none', maxRetries: 0 });
});

after(async () => {
  await s?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function post(api, route, body) {
  const res = await fetch(`${api}${route}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

async function metrics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (name) => Number(text.match(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm'))?.[1] ?? 0);
  return { text, value };
}

const bytesOf = (entries) => Buffer.from(entries.flatMap((e) => e.bytes));

test('streamed logprobs ride with their text: each chunk\'s token bytes are its content', async () => {
  // 2-, 3- and 4-byte characters, which the default model's byte-level vocabulary writes a byte
  // at a time (held back until whole), in a reply long enough to stream in many chunks.
  const grammar = 'root ::= "Hé said " [a-z]{2,8} " € " [a-z]{1,6} " 😀 " [a-zé€😀 ]{300,400}';
  for (const seed of [1, 2, 3]) {
    const stream = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'Speak.' }], max_tokens: 2000, temperature: 1, seed, stream: true,
      logprobs: true, top_logprobs: 2, grammar,
    });
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (!c) continue;
      const content = c.delta.content ?? '';
      const entries = c.logprobs?.content ?? [];
      if (content === '' && entries.length === 0) continue;
      ++chunks;
      assert.deepEqual(bytesOf(entries), Buffer.from(content, 'utf8'), `seed ${seed}, chunk ${chunks}: ${JSON.stringify(c)}`);
      for (const e of entries) assert.equal(e.top_logprobs.length, 2);
      text += content;
    }
    // The handler takes what is pending: a fast model's tokens share chunks, a slow one's do not.
    assert.ok(chunks >= 5, `${chunks} chunks`);
    assert.match(text, /^Hé said [a-z]+ € [a-z]+ 😀 /);
  }
  // Completions: tokens and text_offset (bytes) agree with each chunk's text.
  const stream = await client.completions.create({ prompt: 'ROMEO:', max_tokens: 30, temperature: 0, logprobs: 1, stream: true });
  let offset = 0;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c?.logprobs) continue;
    assert.equal(c.logprobs.tokens.join(''), c.text);
    if (c.logprobs.text_offset.length > 0) assert.equal(c.logprobs.text_offset[0], offset);
    offset += Buffer.byteLength(c.text);
  }
  assert.ok(offset > 0);
});

test('GET /v1/models/{id}: the model object, or 404', async () => {
  const m = await client.models.retrieve('default-model');
  assert.equal(m.id, 'default-model');
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'nanoinfer');
  const res = await fetch(`${s.api}/models/gpt-4o`);
  assert.equal(res.status, 404);
  assert.equal((await res.json()).error.code, 'model_not_found');
});

test('unknown fields are refused as OpenAI does; vendor fields are accepted', async () => {
  const user = [{ role: 'user', content: 'hi' }];
  const r = await post(s.api, '/chat/completions', { messages: user, max_tokens: 2, temprature: 0 });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.message, 'Unrecognized request argument supplied: temprature');
  const ok = await client.chat.completions.create({
    messages: user, max_tokens: 2, user: 'u-1', metadata: { app: 'test' }, store: false, service_tier: 'auto',
    safety_identifier: 'h1', prompt_cache_key: 'k', stream_options: undefined, n: 1,
  });
  assert.equal(ok.choices.length, 1);
  for (const [extra, name] of [[{ temperature: 2.5 }, 'temperature'], [{ reasoning_effort: 'low' }, 'reasoning_effort'],
    [{ n: 2 }, 'n'], [{ top_p: 1.5 }, 'top_p']]) {
    const bad = await post(s.api, '/chat/completions', { messages: user, ...extra });
    assert.equal(bad.status, 400, name);
    assert.match(bad.json.error.message, new RegExp(`'${name}'`));
  }
});

test('completions take a prompt as text, token ids, or an array of several, one choice each', async () => {
  const greedy = { max_tokens: 8, temperature: 0, return_token_ids: true };
  const text = await post(s.api, '/completions', { prompt: 'ROMEO:', ...greedy });
  assert.equal(text.status, 200);
  const ids = text.json.choices[0].prompt_token_ids;
  for (const prompt of [['ROMEO:'], ids, [ids]]) {
    const r = await post(s.api, '/completions', { prompt, ...greedy });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.choices[0].text, text.json.choices[0].text);
    assert.deepEqual(r.json.choices[0].prompt_token_ids, ids);
  }
  // Several prompts: one choice each, in order, each the text its prompt alone gets.
  const prompts = ['ROMEO:', 'JULIET:', ids];
  const alone = [];
  for (const prompt of prompts) alone.push((await post(s.api, '/completions', { prompt, ...greedy })).json);
  const batch = await post(s.api, '/completions', { prompt: prompts, ...greedy });
  assert.equal(batch.status, 200, JSON.stringify(batch.json));
  assert.deepEqual(batch.json.choices.map((c) => c.index), [0, 1, 2]);
  batch.json.choices.forEach((c, i) => {
    assert.equal(c.text, alone[i].choices[0].text, `prompt ${i}`);
    assert.deepEqual(c.prompt_token_ids, alone[i].choices[0].prompt_token_ids);
  });
  assert.equal(batch.json.usage.completion_tokens, alone.reduce((n, a) => n + a.usage.completion_tokens, 0));
  assert.equal(batch.json.usage.prompt_tokens, alone.reduce((n, a) => n + a.usage.prompt_tokens, 0));
  // Streamed: each choice's chunks concatenate to its text; the usage once, then [DONE].
  const streamed = await client.completions.create({ prompt: prompts, max_tokens: 8, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  const texts = ['', '', ''];
  let usage = null;
  for await (const chunk of streamed) {
    for (const c of chunk.choices) texts[c.index] += c.text;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.deepEqual(texts, alone.map((a) => a.choices[0].text));
  assert.equal(usage.completion_tokens, batch.json.usage.completion_tokens);
  const badOne = await post(s.api, '/completions', { prompt: ['a', [1, 999999]], max_tokens: 2 });
  assert.equal(badOne.status, 400);
  assert.match(badOne.json.error.message, /^prompt 1: .*token 999999/);
  const big = await post(s.api, '/completions', { prompt: [1, 999999], max_tokens: 2 });
  assert.equal(big.status, 400);
  assert.match(big.json.error.message, /token 999999/);
});

test('response ids are random, not counters', async () => {
  const seen = new Set();
  for (let i = 0; i < 3; ++i) {
    const r = await client.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    assert.match(r.id, /^chatcmpl-[A-Za-z0-9]{24}$/);
    seen.add(r.id);
  }
  assert.equal(seen.size, 3);
  const c = await client.completions.create({ prompt: 'x', max_tokens: 1 });
  assert.match(c.id, /^cmpl-[A-Za-z0-9]{24}$/);
});

test('a stream the client cuts is logged and counted 499 with the tokens it generated', async () => {
  const before = await metrics(s.base);
  // 4,000 tokens take the default model about 2 s; the client leaves after its second chunk
  // (the SDK's own abort, which ends the iteration quietly).
  const stream = await client.completions.create({ prompt: 'ROMEO:', max_tokens: 4000, temperature: 0, stream: true });
  let chunks = 0;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.text && ++chunks === 2) stream.controller.abort();
  }
  assert.ok(chunks >= 2, `${chunks} chunks`);  // (events already received still come out)
  let after;
  for (let waited = 0; waited < 30000; waited += 100) {
    after = await metrics(s.base);
    if (after.value('nanoinfer_requests_total{status="499"}') > before.value('nanoinfer_requests_total{status="499"}')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(after.value('nanoinfer_requests_total{status="499"}'), before.value('nanoinfer_requests_total{status="499"}') + 1, after.text);
  const generated = after.value('nanoinfer_completion_tokens_total') - before.value('nanoinfer_completion_tokens_total');
  assert.ok(generated >= 2 && generated < 4000, `generated ${generated}`);
  const line = s.stderr().split('\n').filter((l) => / POST \/v1\/completions 499 /.test(l)).at(-1);
  assert.match(line ?? '', new RegExp(` 499 tokens \\d+\\+${generated} `), s.stderr());
});

// ---- a reasoning model -------------------------------------------------------------------------

const qwen3Tokenizer = path.join(root, '.deps/qwen3-tokenizer');
const THINK = 151667, END_THINK = 151668;

function tinyQwen3() {
  const config = JSON.parse(fs.readFileSync(path.join(root, 'tests/data/models/tiny-qwen3/config.json'), 'utf8'));
  Object.assign(config, { vocab_size: 151936, bos_token_id: 151643, eos_token_id: 151645, max_position_embeddings: 512 });
  const cfg = path.join(tmp, 'config.json');
  fs.writeFileSync(cfg, JSON.stringify(config));
  const dir = path.join(tmp, 'qwen3');
  const r = spawnSync(args.nanoinfer, ['synth', '--config', cfg, '--out', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(qwen3Tokenizer, f), path.join(dir, f));
  return dir;
}

// The grammar writes what a thinking Qwen3 writes; the random model picks the letters.
const thinking = 'root ::= "<think>\\n" [a-z]{2,6} " " [a-z]{2,6} "\\n</think>\\n\\n" [A-Z] [a-z]{2,8} "."';
const ask = (extra) => ({ model: 'qwen3', messages: [{ role: 'user', content: 'Why?' }], max_tokens: 60, temperature: 1,
  seed: 5, grammar: thinking, ...extra });

test('Qwen3: the think block is reasoning_content, streamed and not; enable_thinking and --reasoning', async (t) => {
  if (!fs.existsSync(path.join(qwen3Tokenizer, 'tokenizer.json'))) {
    t.skip('.deps/qwen3-tokenizer is missing (run scripts/fetch-test-assets.sh)');
    return;
  }
  const dir = tinyQwen3();
  for (const mode of ['on', 'off', 'raw']) {
    const q = await startServe(args.nanoinfer, ['-m', dir, '--model-id', 'qwen3', '--reasoning', mode, '--quiet']);
    try {
      const qc = new OpenAI({ baseURL: q.api, apiKey: 'none', maxRetries: 0 });
      const whole = await qc.chat.completions.create(ask({}));
      const msg = whole.choices[0].message;
      if (mode === 'on') {
        assert.match(msg.reasoning_content, /^[a-z]+ [a-z]+$/, JSON.stringify(msg));
        assert.match(msg.content, /^[A-Z][a-z]+\.$/);
        // The stream splits the same text the same way, the tags split across tokens or not.
        const stream = await qc.chat.completions.create(ask({ stream: true }));
        let reasoning = '';
        let content = '';
        for await (const chunk of stream) {
          const d = chunk.choices[0]?.delta ?? {};
          reasoning += d.reasoning_content ?? '';
          content += d.content ?? '';
          assert.ok(!(d.reasoning_content && d.content), 'a chunk is reasoning or content');
        }
        assert.equal(reasoning, msg.reasoning_content);
        assert.equal(content, msg.content);
      } else if (mode === 'raw') {
        assert.equal(msg.reasoning_content, undefined);
        assert.match(msg.content, /^<think>\n[a-z]+ [a-z]+\n<\/think>\n\n[A-Z][a-z]+\.$/);
      } else {
        // Thinking off by default: the template's empty think block closes the prompt, and the
        // reply is content as written; enable_thinking true turns it back on.
        const off = await post(q.api, '/chat/completions', ask({ grammar: undefined, max_tokens: 1, return_token_ids: true }));
        const on = await post(q.api, '/chat/completions', ask({ grammar: undefined, max_tokens: 1, return_token_ids: true,
          chat_template_kwargs: { enable_thinking: true } }));
        const offIds = off.json.choices[0].prompt_token_ids;
        const onIds = on.json.choices[0].prompt_token_ids;
        assert.deepEqual(offIds.slice(0, onIds.length), onIds);
        assert.ok(offIds.slice(onIds.length).includes(THINK) && offIds.slice(onIds.length).includes(END_THINK),
                  JSON.stringify(offIds.slice(onIds.length)));
        assert.equal(msg.reasoning_content, undefined);
        const thought = await qc.chat.completions.create(ask({ chat_template_kwargs: { enable_thinking: true } }));
        assert.match(thought.choices[0].message.reasoning_content, /^[a-z]+ [a-z]+$/);
      }
    } finally {
      await q.stop();
    }
  }
});
