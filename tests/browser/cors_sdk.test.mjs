// `serve --cors` with the official OpenAI SDK in a real browser: Debian's headless chromium
// (playwright-core) opens a page from another origin (this test's own static server, another
// port) that imports the SDK's browser build as an ES module and calls the API, streamed and
// not. The SDK sends its own headers (x-stainless-*), so the browser's preflight asks for them;
// the server must grant what a preflight asks. Run by CTest (test `serve_cors_sdk`):
//
//   node tests/browser/cors_sdk.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/browser-test --openai .deps/serve-test
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when chromium, playwright-core, the
// openai package or the default model is absent.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from '../serve/serve_process.mjs';
import { CHROMIUM, FLAGS, chromiumOrSkip } from './chromium.mjs';

const { values: args } = parseArgs({
  options: { nanoinfer: { type: 'string' }, deps: { type: 'string' }, openai: { type: 'string' } },
});
if (!args.nanoinfer || !args.deps || !args.openai) {
  console.error('usage: cors_sdk.test.mjs --nanoinfer BINARY --deps DIR --openai DIR');
  process.exit(2);
}
function skip(reason) {
  console.log(`serve_cors_sdk: skipped: ${reason}`);
  process.exit(77);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) skip('data/default-model is missing');
const chromium = chromiumOrSkip(args.deps, skip);
const sdkDir = path.join(path.resolve(args.openai), 'node_modules/openai');
if (!fs.existsSync(path.join(sdkDir, 'index.mjs'))) skip(`the openai package is not installed in ${args.openai}/node_modules`);

const KEY = 'browser-key';
let server, pages, userDataDir, context;
let apiUrl = '';  // the server's, known once it listens (after the page's server)

// The page: the SDK from /openai/ (its ES module build, served as files), calls from the page's
// origin to the server's, the outcome left in window.outcome.
function page() {
  return `<!doctype html><meta charset="utf-8"><title>sdk</title><script type="module">
import { OpenAI } from '/openai/index.mjs';
const client = new OpenAI({ baseURL: ${JSON.stringify(apiUrl)}, apiKey: ${JSON.stringify(KEY)}, dangerouslyAllowBrowser: true, maxRetries: 0 });
try {
  const models = await client.models.list();
  const whole = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0 });
  const stream = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0, stream: true });
  let streamed = '';
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  window.outcome = { ok: true, model: models.data[0].id, whole: whole.choices[0].message.content, streamed };
} catch (e) {
  window.outcome = { ok: false, error: String(e) };
}
</script>`;
}

// A static server on its own port (another origin): the page and the SDK's files.
function startPages() {
  const types = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.map': 'application/json' };
  const srv = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(page());
      return;
    }
    const file = path.join(sdkDir, path.normalize(url.pathname.replace(/^\/openai\//, '')));
    if (!url.pathname.startsWith('/openai/') || !file.startsWith(sdkDir) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'Content-Type': types[path.extname(file)] ?? 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

before(async () => {
  // The page's origin is known only once its server listens: it starts first.
  pages = await startPages();
  const origin = `http://127.0.0.1:${pages.address().port}`;
  server = await startServe(args.nanoinfer, ['--api-key', KEY, '--cors', origin]);
  apiUrl = server.api;
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-cors-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: FLAGS });
});

after(async () => {
  await context?.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  pages?.close();
  await server?.stop();
});

test('the OpenAI SDK in a page of another origin calls the API through CORS, streamed and not', async () => {
  const p = context.pages()[0] ?? (await context.newPage());
  await p.goto(`http://127.0.0.1:${pages.address().port}/`);
  await p.waitForFunction(() => window.outcome !== undefined, null, { timeout: 60000 });
  const outcome = await p.evaluate(() => window.outcome);
  assert.equal(outcome.ok, true, outcome.error);
  assert.equal(outcome.model, 'default-model');
  assert.ok(outcome.whole.length > 0);
  assert.equal(outcome.streamed, outcome.whole);
  // The browser asked first: its preflight named the SDK's own headers, and was granted.
  assert.match(server.stderr(), /OPTIONS \/v1\/chat\/completions 204/);
  const pre = await fetch(`${server.api}/chat/completions`, {
    method: 'OPTIONS',
    headers: { Origin: `http://127.0.0.1:${pages.address().port}`, 'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Headers': 'authorization,content-type,x-stainless-arch,x-stainless-lang' },
  });
  assert.equal(pre.status, 204);
  assert.match(pre.headers.get('access-control-allow-headers'), /x-stainless-arch, x-stainless-lang/);
  // A malformed list is not echoed.
  const odd = await fetch(`${server.api}/chat/completions`, {
    method: 'OPTIONS',
    headers: { Origin: `http://127.0.0.1:${pages.address().port}`, 'Access-Control-Request-Headers': 'x-a, bad header' },
  });
  assert.equal(odd.headers.get('access-control-allow-headers'), 'Authorization, Content-Type');
});
