// Tool calls through `nanoinfer serve` with the official `openai` npm client: a call forced by
// tool_choice "required" (and by a named function), its arguments validated by ajv against the
// function's parameters schema, then the assistant's call and a `tool` message appended and a
// second request answered — both streamed and not. The default model (data/default-model) is
// tiny and untrained: the grammar, not the model, makes the call valid. Run by CTest
// (`serve_tools`):
//
//   node tests/serve/tools.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/serve-test
//
// Exits 77 (skipped) when ajv, the openai package or the default model is missing.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { serveTestWithPackages, startServe } from './serve_process.mjs';

const { args, root, Ajv2020, OpenAI } = serveTestWithPackages('tools');

let server;
let base;
let client;
let modelDir;

// The default model's config allows 256 positions and the tools block alone is longer in its
// small vocabulary: serve a copy whose config allows 2048 (same weights and tokenizer, linked;
// RoPE is defined at any position, and the model is untrained either way).
function widenedDefaultModel() {
  const src = path.join(root, 'data/default-model');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-tools-'));
  for (const name of fs.readdirSync(src)) {
    if (name !== 'config.json') fs.symlinkSync(path.join(src, name), path.join(dir, name));
  }
  const config = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8'));
  config.max_position_embeddings = 2048;
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 1));
  return dir;
}

before(async () => {
  modelDir = widenedDefaultModel();
  const s = await startServe(args.nanoinfer, ['-m', modelDir, '--model-id', 'default-model', '--parallel', '4', '--queue', '16'],
                             { stderr: 'inherit' });
  server = s.proc;
  base = s.api;
  client = new OpenAI({ baseURL: base, apiKey: 'none', maxRetries: 0 });
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.on('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  }
  if (modelDir) fs.rmSync(modelDir, { recursive: true, force: true });
});

const weather = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 12 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 5 },
  },
  required: ['city', 'days'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather forecast for a city.', parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'The time now.', parameters: { type: 'object', properties: {}, additionalProperties: false } } },
];
const schemas = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
const ajv = new Ajv2020({ strict: false });
const validators = Object.fromEntries(Object.entries(schemas).map(([name, s]) => [name, ajv.compile(s)]));

function checkCalls(calls, { only } = {}) {
  assert.ok(Array.isArray(calls) && calls.length >= 1, JSON.stringify(calls));
  const ids = new Set();
  for (const c of calls) {
    assert.equal(c.type, 'function');
    assert.match(c.id, /^call_[A-Za-z0-9]{24}$/);
    ids.add(c.id);
    assert.equal(typeof c.function.arguments, 'string');
    if (only) assert.equal(c.function.name, only);
    const validate = validators[c.function.name];
    assert.ok(validate, `unknown function ${c.function.name}`);
    const parsed = JSON.parse(c.function.arguments);
    assert.ok(validate(parsed), `${c.function.arguments}: ${ajv.errorsText(validate.errors)}`);
  }
  assert.equal(ids.size, calls.length, 'ids are distinct');
}

const question = [{ role: 'user', content: 'What is the weather in Paris for the next 3 days?' }];
// The untrained model rarely picks end of sequence while the grammar still allows another
// call, so `required` usually runs to the cap of 8 calls (~70 tokens each in its small
// vocabulary); 800 tokens hold them all, so a run ends by end of sequence.
const sampling = { temperature: 1, max_tokens: 800 };

// Streams a request and folds the deltas the way OpenAI clients do.
async function streamed(body) {
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let content = '';
  let finish = null;
  const calls = [];
  let sawRole = false;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.role) sawRole = true;
    content += choice.delta.content ?? '';
    for (const d of choice.delta.tool_calls ?? []) {
      if (!calls[d.index]) calls[d.index] = { id: d.id, type: d.type, function: { name: '', arguments: '' } };
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  assert.ok(sawRole);
  return { content, calls, finish };
}

for (const stream of [false, true]) {
  test(`required call -> tool result -> final answer (${stream ? 'streamed' : 'not streamed'})`, async () => {
    let calls = null;
    let content = null;
    for (let seed = 1; seed <= 6 && calls === null; ++seed) {
      const body = { model: 'default-model', messages: question, tools, tool_choice: 'required', seed, ...sampling };
      if (stream) {
        const r = await streamed(body);
        if (r.finish === 'length') continue;  // cut by max_tokens: try another seed
        assert.equal(r.finish, 'tool_calls');
        calls = r.calls;
        content = r.content;
      } else {
        const r = await client.chat.completions.create(body);
        const choice = r.choices[0];
        if (choice.finish_reason === 'length') continue;
        assert.equal(choice.finish_reason, 'tool_calls');
        assert.equal(choice.message.role, 'assistant');
        assert.equal(choice.message.content, null);
        calls = choice.message.tool_calls;
        content = choice.message.content;
      }
    }
    assert.ok(calls, 'every seed was cut by max_tokens');
    assert.ok(content === null || content === '', `no text next to forced calls: ${JSON.stringify(content)}`);
    checkCalls(calls);

    // The conversation continues with the call and one result per call.
    const messages = [...question, { role: 'assistant', content: null, tool_calls: calls }];
    for (const c of calls) messages.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify({ temperature: 21, sky: 'clear' }) });
    const body = { model: 'default-model', messages, tools, seed: 7, temperature: 1, max_tokens: 12 };
    if (stream) {
      const r = await streamed(body);
      assert.ok(['stop', 'length'].includes(r.finish), r.finish);
      assert.equal(r.calls.length, 0);
      assert.equal(typeof r.content, 'string');
    } else {
      const r = await client.chat.completions.create(body);
      const choice = r.choices[0];
      assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
      assert.equal(typeof choice.message.content, 'string');
      assert.equal(choice.message.tool_calls, undefined);
      // The prompt holds the tools block, the call and the result: longer than the question alone.
      const first = await client.chat.completions.create({ model: 'default-model', messages: question, tools, max_tokens: 1 });
      assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens + 20, `${r.usage.prompt_tokens} vs ${first.usage.prompt_tokens}`);
    }
  });
}

test('a named function, one call without parallel_tool_calls, streamed and not', async () => {
  for (const stream of [false, true]) {
    for (const seed of [11, 12]) {
      const body = {
        model: 'default-model', messages: question, tools, seed, ...sampling,
        tool_choice: { type: 'function', function: { name: 'get_time' } },
      };
      let calls, finish;
      if (stream) {
        ({ calls, finish } = await streamed(body));
      } else {
        const r = await client.chat.completions.create(body);
        ({ finish_reason: finish, message: { tool_calls: calls } } = r.choices[0]);
      }
      if (finish === 'length') continue;
      assert.equal(finish, 'tool_calls');
      assert.equal(calls.length, 1);
      checkCalls(calls, { only: 'get_time' });
      const single = await client.chat.completions.create({ ...body, tool_choice: 'required', parallel_tool_calls: false });
      if (single.choices[0].finish_reason !== 'length') assert.equal(single.choices[0].message.tool_calls.length, 1);
    }
  }
});

test('bad tool requests are 400s naming the problem', async () => {
  const cases = [
    [{ tools: [{ type: 'function', function: { description: 'no name' } }] }, 'tools[0].function.name'],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, "'nope'"],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'string', format: 'email' } } } } }], tool_choice: 'required' }, 'format'],
    [{ messages: [{ role: 'tool', content: 'x' }] }, 'tool_call_id'],
  ];
  for (const [extra, needle] of cases) {
    const err = await client.chat.completions.create({ model: 'default-model', messages: question, max_tokens: 2, ...extra })
      .then(() => null, (e) => e);
    assert.ok(err, `accepted: ${JSON.stringify(extra)}`);
    assert.equal(err.status, 400, JSON.stringify(extra));
    assert.ok(err.message.includes(needle), `${JSON.stringify(extra)}: ${err.message}`);
  }
});
