// The chat page of `nanoinfer serve` (web/chat/chat.html, served at /) in a real browser:
// Debian's headless chromium, driven by playwright-core, types two turns the way a person
// would and checks each streamed reply against the API's own non-streamed answer to the same
// conversation (greedy, so they must be equal), the key field and New chat, and three turns
// past the context, whose oldest turns the server drops at the page's request. The page
// may load nothing but itself and call nothing but this server's /v1/*. Run by CTest (test
// `serve_chat_page`):
//
//   node tests/browser/chat.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/browser-test
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when chromium, playwright-core or the
// default model is absent.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from '../serve/serve_process.mjs';

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' }, deps: { type: 'string' } } });
if (!args.nanoinfer || !args.deps) {
  console.error('usage: chat.test.mjs --nanoinfer BINARY --deps DIR');
  process.exit(2);
}
function skip(reason) {
  console.log(`serve_chat_page: skipped: ${reason}`);
  process.exit(77);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) skip('data/default-model is missing');
if (!fs.existsSync(CHROMIUM)) skip(`${CHROMIUM} not found (Debian package chromium; run scripts/install-deps.sh)`);
let chromium;
try {
  ({ chromium } = createRequire(path.join(path.resolve(args.deps), 'index.js'))('playwright-core'));
} catch {
  skip(`playwright-core not installed in ${args.deps}/node_modules (run scripts/fetch-test-assets.sh)`);
}

const KEY = 'page-key';
let server, base, userDataDir, context, page;
const problems = [];  // console errors, page errors, requests anywhere but this server

async function startServer(extra) {
  const s = await startServe(args.nanoinfer, ['--quiet', ...extra], { stderr: 'inherit' });
  return { proc: s.proc, url: s.base };
}

before(async () => {
  ({ proc: server, url: base } = await startServer(['--api-key', KEY]));
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-chat-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1100, height: 800 },
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => { if (!r.url().startsWith(`${base}/`)) problems.push(`request: ${r.url()}`); });
});

after(async () => {
  await context?.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  server?.kill('SIGTERM');
});

// The API's response, not streamed, to a greedy request for the conversation.
function apiPost(messages, fields, headers = {}) {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}`, ...headers },
    body: JSON.stringify({ messages, temperature: 0, ...fields }),
  });
}

// What the API answers, not streamed, for the same conversation.
async function apiReply(messages, fields = { max_tokens: 20 }) {
  const res = await apiPost(messages, fields);
  assert.equal(res.status, 200);
  return (await res.json()).choices[0].message.content;
}

async function sendAndWait(text) {
  await page.locator('#input').fill(text);
  await page.locator('#input').press('Enter');
  await page.waitForFunction(() => document.body.dataset.busy === 'no' && document.querySelectorAll('.msg').length > 0);
}

test('the page is served at / with a strict content security policy', async () => {
  const res = await fetch(`${base}/`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/html/);
  assert.match(res.headers.get('content-security-policy'), /default-src 'none'/);
  assert.match(res.headers.get('content-security-policy'), /connect-src 'self'/);
  assert.match(await res.text(), /<title>nanoinfer chat<\/title>/);
});

test('without the key the page shows the server\'s error and keeps nothing of the turn', async () => {
  await page.goto(`${base}/`);
  await sendAndWait('hello');
  assert.equal(await page.locator('.msg.error .text').textContent(), 'missing or wrong API key (send \'Authorization: Bearer <key>\')');
  await page.locator('#new-chat').click();
  assert.equal(await page.locator('.msg').count(), 0);
  // The browser logs each refused request (the model name at load, then the turn): expected here.
  assert.ok(problems.length > 0 && problems.every((p) => /status of 401/.test(p)), problems.join('\n'));
  problems.length = 0;
});

test('two turns stream replies equal to the API\'s greedy answers for the same conversation', async () => {
  await page.locator('#api-key').fill(KEY);
  await page.locator('#temperature').fill('0');
  await page.locator('#max-tokens').fill('20');
  await page.locator('#system').fill('Answer in verse.');
  await sendAndWait('Who are you?');
  const first = await page.locator('.msg.assistant .text').nth(0).textContent();
  const expected1 = await apiReply([{ role: 'system', content: 'Answer in verse.' }, { role: 'user', content: 'Who are you?' }]);
  assert.equal(first, expected1);
  assert.ok(first.length > 0);
  assert.match(await page.locator('#status').textContent(), /\d+ prompt \+ \d+ completion tokens/);

  await sendAndWait('And then?');
  const second = await page.locator('.msg.assistant .text').nth(1).textContent();
  const expected2 = await apiReply([{ role: 'system', content: 'Answer in verse.' }, { role: 'user', content: 'Who are you?' },
    { role: 'assistant', content: expected1 }, { role: 'user', content: 'And then?' }]);
  assert.equal(second, expected2);
  assert.deepEqual(await page.locator('.msg .who').allTextContents(), ['You', 'Model', 'You', 'Model']);
  // Text stays text: markup typed by the user is shown, not parsed.
  await sendAndWait('<b id="injected">bold</b>');
  assert.equal(await page.locator('#injected').count(), 0);
  assert.equal(await page.locator('.msg.user .text').nth(2).textContent(), '<b id="injected">bold</b>');
  assert.deepEqual(problems, []);
});

// The default model's context is 256 tokens and, without max tokens, a reply may take all that
// the prompt leaves: from the second turn on the conversation no longer fits. The page has the
// server drop the oldest turns, as the CLI chat does, and says so; an API client that does not
// ask still gets the 400.
test('three turns past the context drop the oldest turns, and the page says so', async () => {
  await page.locator('#new-chat').click();
  await page.locator('#max-tokens').fill('');
  await page.locator('#system').fill('');
  const turns = ['Who are you?', 'And then?', 'Farewell.'];
  const replies = [];
  for (const [i, text] of turns.entries()) {
    await sendAndWait(text);
    assert.equal(await page.locator('.msg.error').count(), 0, await page.locator('.msg.error .text').allTextContents());
    replies.push(await page.locator('.msg.assistant .text').nth(i).textContent());
  }
  const first = [{ role: 'user', content: turns[0] }, { role: 'assistant', content: replies[0] }];
  const long = await apiPost([...first, { role: 'user', content: turns[1] }], {});
  assert.equal(long.status, 400);
  assert.equal((await long.json()).error.code, 'context_length_exceeded');
  // Each later turn went out without the turns before it: the reply is the API's to that alone
  // (a second turn kept would not leave half the context for the reply).
  assert.equal(replies[1], await apiReply([{ role: 'user', content: turns[1] }], {}));
  assert.equal(replies[2], await apiReply([{ role: 'user', content: turns[2] }], {}));
  assert.deepEqual(await page.locator('.msg.dropped .text').allTextContents(),
    [turns[0], replies[0], turns[1], replies[1]]);
  assert.deepEqual(await page.locator('.note').allTextContents(), Array(2).fill(
    'The conversation outgrew the model\'s context: its oldest turn was dropped (greyed out; the model no longer sees it).'));
  assert.match(await page.locator('#status').textContent(), /dropped the oldest turn to fit the context$/);
  assert.deepEqual(problems, []);
});

test('the fit-context header: a wrong value is a 400 naming it, a fitting conversation drops nothing', async () => {
  const post = (value, messages) => apiPost(messages, { max_tokens: 4 }, { 'X-Nanoinfer-Fit-Context': value });
  const bad = await post('drop-everything', [{ role: 'user', content: 'Hi' }]);
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).error.message, /X-Nanoinfer-Fit-Context takes 'drop-oldest-turns'/);
  const ok = await post('drop-oldest-turns', [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' },
    { role: 'user', content: 'Bye' }]);
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('x-nanoinfer-dropped-turns'), '0');
});

test('--no-webui serves the API only', async () => {
  const s = await startServer(['--no-webui']);
  try {
    assert.equal((await fetch(`${s.url}/`)).status, 404);
    assert.equal((await fetch(`${s.url}/v1/models`)).status, 200);
  } finally {
    s.proc.kill('SIGTERM');
  }
});
