// Structured output through `nanoinfer serve`, checked by an independent validator: every
// completion that ends by end of sequence must parse as JSON and validate (ajv, JSON Schema
// 2020-12) against the schema it was generated for. The default model (data/default-model) is
// tiny and untrained for JSON, sampled at temperature 1: the grammar, not the model, makes the
// output valid. Also: json_object, the GBNF `grammar` extension, finish_reason "length", the
// 400s for what cannot be enforced, and the shape of logprobs. Run by CTest (`serve_grammar`):
//
//   node tests/serve/grammar.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/serve-test
//
// Exits 77 (skipped) when ajv, the openai package or the default model is missing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { serveTestWithPackages, startServe } from './serve_process.mjs';

const { args, Ajv2020, OpenAI } = serveTestWithPackages('grammar');

let server;
let base;
let client;

before(async () => {
  const s = await startServe(args.nanoinfer, ['--parallel', '4', '--queue', '256'], { stderr: 'inherit' });
  server = s.proc;
  base = s.api;
  client = new OpenAI({ baseURL: base, apiKey: 'none', maxRetries: 0 });
});

after(async () => {
  if (!server || server.exitCode !== null) return;
  const exited = new Promise((resolve) => server.on('exit', resolve));
  server.kill('SIGTERM');
  await exited;
});

async function post(route, body) {
  const res = await fetch(`${base}/${route}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

// ---- the corpus: every supported keyword, several times ------------------------------------------
const S = (maxLength = 6) => ({ type: 'string', maxLength });
const corpus = {
  'boolean': { type: 'boolean' },
  'null': { type: 'null' },
  'integer': { type: 'integer' },
  'number': { type: 'number' },
  'short string': S(4),
  'string lengths': { type: 'string', minLength: 2, maxLength: 5 },
  'type list': { type: ['integer', 'null', 'boolean'] },
  'enum': { enum: ['red', 'green', 'blue', 42, null, { deep: [true] }] },
  'const': { const: { version: 2, tags: ['a', 'b'] } },
  'integer range': { type: 'integer', minimum: -40, maximum: 125 },
  'integer exclusive': { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 1000 },
  'integer lower bound': { type: 'integer', minimum: 1000 },
  'pattern code': { type: 'string', pattern: '^[A-Z]{3}-\\d{2,4}$' },
  'pattern alternation': { type: 'string', pattern: '^(?:cat|dog|\\w\\s\\S)$' },
  'pattern escapes': { type: 'string', pattern: '^a"b\\\\[^a-z]\\.?$' },
  'object required': {
    type: 'object', properties: { name: S(), age: { type: 'integer', minimum: 0, maximum: 130 } },
    required: ['name', 'age'], additionalProperties: false,
  },
  'object optional': {
    type: 'object', properties: { a: { type: 'boolean' }, b: { type: 'null' }, c: S(3) },
    additionalProperties: false,
  },
  'object additional schema': {
    type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['id'],
    additionalProperties: { type: 'boolean' },
  },
  'object additional false, required only': {
    type: 'object', properties: { x: { const: 1 } }, required: ['x'], additionalProperties: false,
  },
  'array items': { type: 'array', items: { type: 'integer', minimum: 0, maximum: 99 }, maxItems: 5 },
  'array min max': { type: 'array', items: { type: 'boolean' }, minItems: 2, maxItems: 4 },
  'prefixItems closed': {
    type: 'array', prefixItems: [S(3), { type: 'integer', minimum: 1, maximum: 3 }, { type: 'null' }], items: false,
  },
  'prefixItems then items': {
    type: 'array', prefixItems: [{ const: 'head' }], items: { type: 'boolean' }, minItems: 2, maxItems: 3,
  },
  'anyOf': { anyOf: [{ type: 'integer', minimum: 0, maximum: 5 }, S(2), { type: 'array', items: { type: 'null' }, maxItems: 2 }] },
  'oneOf types': { oneOf: [{ type: 'boolean' }, { type: 'string', maxLength: 3 }] },
  'oneOf discriminator': {
    oneOf: [
      { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['kind', 'r'], additionalProperties: false },
      { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['kind', 'side'], additionalProperties: false },
    ],
  },
  'allOf': {
    allOf: [
      { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['a'] },
      { properties: { b: { enum: ['x', 'y'] } }, required: ['b'] },
    ],
  },
  '$defs ref': {
    $defs: { point: { type: 'object', properties: { x: { type: 'integer', minimum: -9, maximum: 9 }, y: { type: 'integer', minimum: -9, maximum: 9 } }, required: ['x', 'y'], additionalProperties: false } },
    type: 'array', items: { $ref: '#/$defs/point' }, minItems: 1, maxItems: 2,
  },
  'recursive ref': {
    $ref: '#/$defs/tree',
    $defs: { tree: { type: 'object', properties: { v: { type: 'integer', minimum: 0, maximum: 9 }, kids: { type: 'array', items: { $ref: '#/$defs/tree' }, maxItems: 2 } }, required: ['v'], additionalProperties: false } },
  },
  'definitions ref': {
    definitions: { color: { enum: ['r', 'g', 'b'] } },
    type: 'object', properties: { fg: { $ref: '#/definitions/color' }, bg: { $ref: '#/definitions/color' } }, required: ['fg'], additionalProperties: false,
  },
  'nested': {
    type: 'object',
    properties: {
      user: { type: 'object', properties: { id: { type: 'integer', minimum: 1, maximum: 99 }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } }, required: ['id'], additionalProperties: false },
      ok: { type: 'boolean' },
    },
    required: ['user', 'ok'], additionalProperties: false,
  },
  'nullable via anyOf': { anyOf: [{ type: 'null' }, { type: 'object', properties: { q: { type: 'boolean' } }, required: ['q'], additionalProperties: false }] },
  'any value (true schema)': { type: 'array', items: true, maxItems: 1 },
};

const SEEDS = [1, 2, 3];
const MAX_TOKENS = 96;

test(`${Object.keys(corpus).length} schemas x ${SEEDS.length} seeds: every completion ended by EOS validates (ajv)`, async () => {
  assert.ok(Object.keys(corpus).length >= 30);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const jobs = [];
  for (const [name, schema] of Object.entries(corpus)) {
    const validate = ajv.compile(schema);
    for (const seed of SEEDS) {
      const chat = seed !== 3;  // both endpoints
      const body = {
        max_tokens: MAX_TOKENS, temperature: 1, top_p: 1, top_k: 0, min_p: 0, repetition_penalty: 1, seed,
        response_format: { type: 'json_schema', json_schema: { name: 'corpus', schema, strict: true } },
      };
      if (chat) body.messages = [{ role: 'user', content: `Reply with ${name} as JSON.` }];
      else body.prompt = `The ${name} as JSON:`;
      jobs.push(post(chat ? 'chat/completions' : 'completions', body).then((r) => ({ name, seed, chat, validate, r })));
    }
  }
  let ended = 0;
  let cut = 0;
  for (const { name, seed, chat, validate, r } of await Promise.all(jobs)) {
    assert.equal(r.status, 200, `${name} seed ${seed}: ${JSON.stringify(r.body)}`);
    const choice = r.body.choices[0];
    const text = chat ? choice.message.content : choice.text;
    if (choice.finish_reason === 'length') {
      assert.equal(r.body.usage.completion_tokens, MAX_TOKENS, `${name} seed ${seed}: cut before max_tokens`);
      ++cut;
      continue;
    }
    assert.equal(choice.finish_reason, 'stop');
    let value;
    assert.doesNotThrow(() => { value = JSON.parse(text); }, `${name} seed ${seed}: not JSON: ${text}`);
    assert.ok(validate(value), `${name} seed ${seed}: ${text} is invalid: ${JSON.stringify(validate.errors)}`);
    ++ended;
  }
  console.log(`# ${ended} completions ended by EOS and validated, ${cut} cut by max_tokens`);
  assert.ok(ended >= jobs.length * 0.6, `only ${ended} of ${jobs.length} completions ended by EOS`);
});

test('control: without the grammar the same requests do not validate', async () => {
  const ajv = new Ajv2020({ strict: false });
  const validate = ajv.compile(corpus['object required']);
  let valid = 0;
  for (const seed of SEEDS) {
    const r = await post('chat/completions', {
      messages: [{ role: 'user', content: 'Reply with object required as JSON.' }], max_tokens: MAX_TOKENS, temperature: 1, seed,
    });
    assert.equal(r.status, 200);
    try {
      if (validate(JSON.parse(r.body.choices[0].message.content))) ++valid;
    } catch { /* not JSON */ }
  }
  assert.equal(valid, 0, 'the untrained model alone produced valid JSON: the corpus would prove nothing');
});

test('json_object: completions ended by EOS are JSON objects', async () => {
  const jobs = [1, 2, 3, 4, 5, 6].map((seed) => post('chat/completions', {
    messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 120, temperature: 1, seed,
    response_format: { type: 'json_object' },
  }));
  for (const r of await Promise.all(jobs)) {
    assert.equal(r.status, 200);
    const c = r.body.choices[0];
    if (c.finish_reason === 'length') continue;
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  }
});

test('the GBNF grammar extension constrains completions', async () => {
  for (const seed of [1, 2, 3, 4]) {
    const r = await post('completions', {
      prompt: 'Answer:', max_tokens: 40, temperature: 1, seed,
      grammar: 'root ::= ("yes" | "no") ", " [0-9]{1,3} "."\n',
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.choices[0].finish_reason, 'stop');
    assert.match(r.body.choices[0].text, /^(yes|no), [0-9]{1,3}\.$/);
  }
});

test('a constrained completion cut by max_tokens reports length', async () => {
  const r = await post('chat/completions', {
    messages: [{ role: 'user', content: 'x' }], max_tokens: 3, temperature: 1, seed: 5,
    response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'array', items: { type: 'integer' }, minItems: 50 } } },
  });
  assert.equal(r.status, 200);
  assert.equal(r.body.choices[0].finish_reason, 'length');
  assert.equal(r.body.usage.completion_tokens, 3);
});

test('what cannot be enforced or is not implemented is a 400 naming it', async () => {
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'f', schema: { type: 'string', format: 'email' } } } }, 'format'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'f', schema: { type: 'array', uniqueItems: true } } } }, 'uniqueItems'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'f', schema: { type: 'number', minimum: 1 } } } }, 'minimum'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'f', schema: { type: 'string', pattern: '(?<=a)b' } } } }, 'pattern'],
    [{ response_format: { type: 'xml' } }, 'response_format.type'],
    [{ grammar: 'root ::= missing' }, 'missing'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string', format: 'email' } } }], tool_choice: 'required' }, 'format'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ n: 2 }, 'n'],
    [{ top_logprobs: 3 }, 'top_logprobs'],
    [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
    [{ logit_bias: { abc: 1 } }, 'logit_bias'],
    [{ logit_bias: { 5: 101 } }, 'logit_bias'],
    [{ presence_penalty: 3 }, 'presence_penalty'],
  ];
  for (const [extra, needle] of cases) {
    const r = await post('chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 2, ...extra });
    assert.equal(r.status, 400, JSON.stringify(extra));
    assert.ok(r.body.error.message.includes(needle), `${JSON.stringify(extra)}: ${r.body.error.message}`);
  }
  for (const [extra, needle] of [[{ echo: true }, 'echo'], [{ best_of: 2 }, 'best_of'], [{ suffix: 'z' }, 'suffix']]) {
    const r = await post('completions', { prompt: 'x', max_tokens: 2, ...extra });
    assert.equal(r.status, 400, JSON.stringify(extra));
    assert.ok(r.body.error.message.includes(needle), r.body.error.message);
  }
});

test('logprobs through the openai client: chat, streamed chat and completions', async () => {
  const req = { model: undefined, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 12, temperature: 1, seed: 9, logprobs: true, top_logprobs: 3 };
  const r = await client.chat.completions.create(req);
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  assert.equal(content.map((t) => Buffer.from(t.bytes)).reduce((a, b) => Buffer.concat([a, b]), Buffer.alloc(0)).toString(),
               r.choices[0].message.content);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    for (let k = 1; k < 3; ++k) assert.ok(t.top_logprobs[k - 1].logprob >= t.top_logprobs[k].logprob);
    assert.ok(t.logprob <= t.top_logprobs[0].logprob + 1e-12);
  }
  // Streamed: the same tokens and numbers, spread over the chunks.
  const stream = await client.chat.completions.create({ ...req, stream: true });
  const streamed = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
  }
  assert.deepEqual(streamed, content);
  // Completions: the legacy parallel lists.
  const c = await client.completions.create({ prompt: 'Once upon', max_tokens: 8, temperature: 0, logprobs: 2 });
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, c.usage.completion_tokens);
  assert.equal(lp.top_logprobs[0] && Object.keys(lp.top_logprobs[0]).length <= 2, true);
  // Greedy: the chosen token is the most likely one.
  for (let i = 0; i < lp.tokens.length; ++i) assert.ok(Math.abs(Math.max(...Object.values(lp.top_logprobs[i])) - lp.token_logprobs[i]) < 1e-9);
  assert.equal(lp.text_offset[0], 0);
});
