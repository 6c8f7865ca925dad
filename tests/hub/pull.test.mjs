// `nanoinfer pull`, `list`, `rm` and `-m ORG/NAME` against a local hub (hub_server.mjs) on
// loopback, through HF_ENDPOINT: a fresh pull then generation with the hub gone, a cut
// connection resumed with a Range request (the bytes served counted), a corrupted byte refused,
// offline mode, a cache laid out by the hub's own tools, GGUF quant choice, tokens, a full disk.
//
//   node tests/hub/pull.test.mjs --nanoinfer build/release/nanoinfer
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when the default model is missing.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from '../serve/serve_process.mjs';
import { startHub } from './hub_server.mjs';

const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' } } });
if (!args.nanoinfer) {
  console.error('usage: pull.test.mjs --nanoinfer BINARY');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const modelDir = path.join(root, 'data/default-model');
if (!fs.existsSync(path.join(modelDir, 'model.safetensors'))) {
  console.log('hub_pull: skipped: data/default-model is missing');
  process.exit(77);
}
const bin = path.resolve(args.nanoinfer);
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-pull-'));
process.on('exit', () => fs.rmSync(work, { recursive: true, force: true }));

const REPO = 'nanoinfer-test/default-model';
const GGUF_REPO = 'nanoinfer-test/default-model-GGUF';
const PRIVATE_REPO = 'nanoinfer-test/private-model';
const TOKEN = 'hf_testtoken';
const modelFiles = {};
for (const f of ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
  modelFiles[f] = fs.readFileSync(path.join(modelDir, f));
const weights = modelFiles['model.safetensors'];
// What a real repository also holds and a model does not need.
const extras = { 'README.md': Buffer.from('# a model card\n'), 'pytorch_model.bin': Buffer.alloc(4096, 7) };

// Runs the binary with the hub's environment pointing into `home`; HOME too, so nothing of the
// machine's own cache or token is seen. Asynchronous: the hub answers from this process.
function run(argv, { home, endpoint = 'http://127.0.0.1:9', env = {}, command = bin }) {
  const e = { ...process.env, HOME: home, HF_HOME: path.join(home, 'hf'), HF_ENDPOINT: endpoint, ...env };
  for (const k of ['HF_TOKEN', 'HF_HUB_CACHE', 'HF_HUB_OFFLINE', 'XDG_CACHE_HOME', 'NANOINFER_THREADS']) {
    if (!(k in env)) delete e[k];
  }
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { cwd: work, env: e, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
const out = async (argv, opts) => (await ok(argv, opts)).stdout;
async function ok(argv, opts) {
  const r = await run(argv, opts);
  assert.equal(r.status, 0, `${argv.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return r;
}
// The contract of every failure: exit 1, one line "nanoinfer: error: ..." holding `needle`.
function oneLineError(r, needle) {
  assert.equal(r.status, 1, `exit ${r.status}: ${r.stderr}`);
  assert.match(r.stderr, /^nanoinfer: error: [^\n]*\n$/, r.stderr);
  assert.ok(r.stderr.includes(needle), `expected "${needle}" in: ${r.stderr}`);
}
const newHome = (name) => fs.mkdtempSync(path.join(work, `${name}-`));
const repoDir = (home, repo) => path.join(home, 'hf/hub', `models--${repo.replace('/', '--')}`);

const greedy = ['generate', '-p', 'ROMEO:', '-n', '12', '--temp', '0', '-t', '1'];
const embeddedText = await out(greedy, { home: newHome('embedded') });

// After a failed pull: the next one completes, and the model generates as the embedded one does.
async function pullAgainAndGenerate(hub, home) {
  await ok(['pull', REPO], { home, endpoint: hub.url });
  await hub.close();
  assert.equal(await out([...greedy, '-m', REPO], { home }), embeddedText);
}

test('a fresh pull lays out the hub cache, and -m ORG/NAME generates with the hub gone', async () => {
  const hub = await startHub({ [REPO]: { files: { ...modelFiles, ...extras } } });
  const home = newHome('fresh');
  const r = await ok(['pull', REPO], { home, endpoint: hub.url });
  assert.match(r.stdout, /5 files/);
  assert.equal(r.stderr, '', 'no progress bar on a pipe');
  await hub.close();
  // Only what a model needs was asked for: not the card, not the PyTorch weights.
  assert.equal(hub.served[`${REPO}/README.md`], undefined);
  assert.equal(hub.served[`${REPO}/pytorch_model.bin`], undefined);
  assert.equal(hub.served[`${REPO}/model.safetensors`], weights.length);

  const dir = repoDir(home, REPO);
  const commit = hub.repos[REPO].commit;
  assert.equal(fs.readFileSync(path.join(dir, 'refs/main'), 'utf8'), commit);
  for (const [name, buf] of Object.entries(modelFiles)) {
    const link = path.join(dir, 'snapshots', commit, name);
    const f = hub.repos[REPO].files[name];
    const etag = f.lfs ? f.sha256 : f.blobId;
    assert.equal(fs.readlinkSync(link), `../../blobs/${etag}`, name);
    assert.ok(fs.readFileSync(link).equals(buf), name);
  }
  assert.deepEqual(fs.readdirSync(path.join(dir, 'blobs')).filter((b) => b.endsWith('.incomplete')), []);

  assert.equal(await out([...greedy, '-m', REPO], { home, endpoint: hub.url }), embeddedText);
  assert.equal(await out([...greedy, '-m', `${REPO}@main`], { home }), embeddedText);
  assert.equal(await out([...greedy, '-m', `${REPO}@${commit}`], { home }), embeddedText);

  const list = await out(['list'], { home });
  assert.match(list, new RegExp(`^${REPO}\\s+5\\.\\d MiB\\s+main=${commit.slice(0, 12)}$`, 'm'), list);
  assert.match(await out(['rm', REPO], { home }), new RegExp(`removed ${REPO} \\(5\\.\\d MiB\\)`));
  assert.equal(fs.existsSync(dir), false);
  oneLineError(await run(['rm', REPO], { home }), 'not in the Hugging Face cache');
  oneLineError(await run([...greedy, '-m', REPO], { home }), `nanoinfer pull ${REPO}`);
});

test('serve -m ORG/NAME names the model after its repository', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('serve');
  await ok(['pull', REPO], { home, endpoint: hub.url });
  await hub.close();
  // startServe passes this process's environment on.
  const saved = { HOME: process.env.HOME, HF_HOME: process.env.HF_HOME };
  Object.assign(process.env, { HOME: home, HF_HOME: path.join(home, 'hf') });
  let server;
  try {
    server = await startServe(bin, ['-m', REPO, '-t', '1']);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  try {
    const models = await (await fetch(`${server.api}/models`)).json();
    assert.deepEqual(models.data.map((m) => m.id), [REPO]);
  } finally {
    await server.stop();
  }
});

test('a pull of a cached model transfers nothing', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('again');
  await ok(['pull', REPO], { home, endpoint: hub.url });
  hub.served = {};
  hub.requests = [];
  assert.match(await out(['pull', REPO], { home, endpoint: hub.url }), /\(0 B downloaded\)/);
  assert.deepEqual(hub.served, {});
  assert.deepEqual(hub.requests.map((q) => q.url), [`/api/models/${REPO}/revision/main?blobs=true`]);
  await hub.close();
});

test('a connection cut mid-file leaves a partial blob that the next pull resumes', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('cut');
  const key = `${REPO}/model.safetensors`;
  hub.cut = { path: key, after: 2 * 1024 * 1024 };
  const r = await run(['pull', REPO], { home, endpoint: hub.url });
  oneLineError(r, 'model.safetensors broke off after');
  assert.ok(r.stderr.includes('pull again to resume'), r.stderr);
  const dir = repoDir(home, REPO);
  const f = hub.repos[REPO].files['model.safetensors'];
  const partial = path.join(dir, 'blobs', `${f.sha256}.incomplete`);
  const kept = fs.statSync(partial).size;
  assert.ok(kept > 0 && kept <= 2 * 1024 * 1024, `kept ${kept}`);
  // No finished file where one is expected: no blob, no snapshot link, no ref.
  assert.equal(fs.existsSync(path.join(dir, 'blobs', f.sha256)), false);
  assert.equal(fs.existsSync(path.join(dir, 'snapshots')), false);
  assert.equal(fs.existsSync(path.join(dir, 'refs/main')), false);
  oneLineError(await run([...greedy, '-m', REPO], { home }), 'nanoinfer pull');

  hub.served = {};
  hub.requests = [];
  await ok(['pull', REPO], { home, endpoint: hub.url });
  assert.equal(hub.served[key], weights.length - kept, 'only the rest was transferred');
  assert.ok(hub.requests.some((q) => q.server === 'cdn' && q.range === `bytes=${kept}-`), JSON.stringify(hub.requests));
  assert.equal(fs.existsSync(partial), false);
  assert.equal(await out([...greedy, '-m', REPO], { home }), embeddedText);
  await hub.close();
});

test('a server that ignores the Range request gets the whole file written afresh', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('norange');
  const key = `${REPO}/model.safetensors`;
  hub.cut = { path: key, after: 1024 * 1024 };
  oneLineError(await run(['pull', REPO], { home, endpoint: hub.url }), 'broke off');
  hub.ignoreRange = true;
  hub.served = {};
  await pullAgainAndGenerate(hub, home);
  assert.equal(hub.served[key], weights.length);
});

test('a corrupted byte is refused by the checksum and nothing is kept', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('corrupt');
  hub.corrupt = { path: `${REPO}/model.safetensors`, offset: 4000000 };
  oneLineError(await run(['pull', REPO], { home, endpoint: hub.url }), 'model.safetensors failed its checksum');
  const dir = repoDir(home, REPO);
  const blobs = fs.readdirSync(path.join(dir, 'blobs'));
  const f = hub.repos[REPO].files['model.safetensors'];
  assert.ok(!blobs.includes(f.sha256) && !blobs.includes(`${f.sha256}.incomplete`), blobs.join(' '));
  assert.equal(fs.existsSync(path.join(dir, 'refs/main')), false);
  hub.corrupt = null;
  await pullAgainAndGenerate(hub, home);
});

test('offline mode reads the cache and never the network', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('offline');
  await ok(['pull', REPO], { home, endpoint: hub.url });
  hub.requests = [];
  const offline = { HF_HUB_OFFLINE: '1' };
  assert.match(await out(['pull', REPO], { home, endpoint: hub.url, env: offline }), /in the cache \(HF_HUB_OFFLINE/);
  oneLineError(await run(['pull', 'nanoinfer-test/absent'], { home, endpoint: hub.url, env: offline }), 'HF_HUB_OFFLINE is set');
  assert.equal(await out([...greedy, '-m', REPO], { home, endpoint: hub.url, env: offline }), embeddedText);
  // -m never downloads, offline or not: a model missing from the cache says how to pull it.
  oneLineError(await run([...greedy, '-m', 'nanoinfer-test/absent'], { home, endpoint: hub.url }),
               'download it with `nanoinfer pull nanoinfer-test/absent`');
  assert.deepEqual(hub.requests, []);
  await hub.close();
});

test('a cache laid out by the hub tools is used without a second download', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('hubcache');
  // As huggingface_hub writes it: blobs named by sha256 (LFS) or git blob sha1, relative links
  // from the snapshot, refs/main holding the commit.
  const dir = repoDir(home, REPO);
  const commit = hub.repos[REPO].commit;
  fs.mkdirSync(path.join(dir, 'blobs'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'snapshots', commit), { recursive: true });
  fs.mkdirSync(path.join(dir, 'refs'));
  for (const [name, buf] of Object.entries(modelFiles)) {
    const f = hub.repos[REPO].files[name];
    const etag = f.lfs ? f.sha256 : f.blobId;
    fs.writeFileSync(path.join(dir, 'blobs', etag), buf);
    fs.symlinkSync(`../../blobs/${etag}`, path.join(dir, 'snapshots', commit, name));
  }
  fs.writeFileSync(path.join(dir, 'refs/main'), commit);
  assert.equal(await out([...greedy, '-m', REPO], { home }), embeddedText);
  assert.match(await out(['list'], { home }), new RegExp(`^${REPO}\\s+5\\.\\d MiB`, 'm'));
  assert.match(await out(['pull', REPO], { home, endpoint: hub.url }), /\(0 B downloaded\)/);
  assert.deepEqual(hub.served, {});
  await hub.close();
});

test('a GGUF repository: the :QUANT chooses the one file, an ambiguous choice is listed', async () => {
  const gguf = path.join(work, 'default-model-Q8_0.gguf');
  const f32 = path.join(work, 'default-model-F32.gguf');
  await ok(['quantize', '--type', 'int8', '--method', 'rtn', '--format', 'gguf', '--out', gguf], { home: newHome('q') });
  await ok(['quantize', '--type', 'f32', '--format', 'gguf', '--out', f32], { home: newHome('q') });
  const hub = await startHub({ [GGUF_REPO]: { files: {
    'default-model-Q8_0.gguf': fs.readFileSync(gguf), 'default-model-F32.gguf': fs.readFileSync(f32),
    'README.md': Buffer.from('# GGUF files\n') } } });
  const home = newHome('gguf');
  oneLineError(await run(['pull', GGUF_REPO], { home, endpoint: hub.url }),
               ':F32 (default-model-F32.gguf), :Q8_0 (default-model-Q8_0.gguf)');
  oneLineError(await run(['pull', `${GGUF_REPO}:Q4_K_M`], { home, endpoint: hub.url }), 'no GGUF file is quantized as Q4_K_M');
  await ok(['pull', `${GGUF_REPO}:q8_0`], { home, endpoint: hub.url });
  assert.deepEqual(Object.keys(hub.served), [`${GGUF_REPO}/default-model-Q8_0.gguf`]);
  await hub.close();
  const local = await out([...greedy, '-m', gguf], { home });
  assert.equal(await out([...greedy, '-m', `${GGUF_REPO}:Q8_0`], { home }), local);
  assert.equal(await out([...greedy, '-m', GGUF_REPO], { home }), local, 'the only cached GGUF file');
  assert.match(await out(['list'], { home }), new RegExp(`^${GGUF_REPO}\\s+\\d+\\.\\d MiB\\s+main=[0-9a-f]{12} :Q8_0$`, 'm'));
});

test('401 and 404 are one line; HF_TOKEN opens a private repository and never reaches the content server', async () => {
  const hub = await startHub({ [PRIVATE_REPO]: { files: modelFiles, token: TOKEN } });
  const home = newHome('auth');
  oneLineError(await run(['pull', PRIVATE_REPO], { home, endpoint: hub.url }), '401 Unauthorized');
  oneLineError(await run(['pull', `${PRIVATE_REPO}@v9`], { home, endpoint: hub.url, env: { HF_TOKEN: TOKEN } }),
               '404 Not Found: Invalid rev id: v9');
  oneLineError(await run(['pull', 'not a name'], { home, endpoint: hub.url }), 'ORG/NAME[@REVISION][:QUANT]');
  hub.requests = [];
  await ok(['pull', PRIVATE_REPO], { home, endpoint: hub.url, env: { HF_TOKEN: TOKEN } });
  const auth = hub.requests.map((q) => [q.server, q.authorization]);
  assert.ok(auth.some(([s, a]) => s === 'hub' && a === `Bearer ${TOKEN}`), JSON.stringify(auth));
  assert.ok(auth.some(([s]) => s === 'cdn'), JSON.stringify(auth));
  assert.ok(auth.every(([s, a]) => s === 'hub' || a === undefined), JSON.stringify(auth));
  await hub.close();
  oneLineError(await run(['pull', REPO], { home, endpoint: hub.url }), 'cannot reach');
});

test('a write that fails (a full disk) is one line and keeps the partial file for a resume', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('full');
  // A file size limit makes write() fail as a full disk does (EFBIG instead of ENOSPC).
  const r = await run(['-c', `trap '' XFSZ; ulimit -f 2048; exec "$0" pull ${REPO}`, bin],
                      { home, endpoint: hub.url, command: 'sh' });
  oneLineError(r, 'File too large');
  assert.ok(r.stderr.includes('bytes kept; pull again to resume'), r.stderr);
  await pullAgainAndGenerate(hub, home);
});

test('a blob another pull is downloading is left to it (the hub tools\' lock file)', async () => {
  const hub = await startHub({ [REPO]: { files: modelFiles } });
  const home = newHome('lock');
  const sha = hub.repos[REPO].files['model.safetensors'].sha256;
  const lock = path.join(home, 'hf/hub/.locks', `models--${REPO.replace('/', '--')}`, `${sha}.lock`);
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  // flock(1) holds the lock, as huggingface_hub does while it downloads that blob, and runs pull.
  const r = await run([lock, bin, 'pull', REPO], { home, endpoint: hub.url, command: 'flock' });
  oneLineError(r, 'another download of model.safetensors is running');
  assert.equal(hub.served[`${REPO}/model.safetensors`], undefined);
  await ok(['pull', REPO], { home, endpoint: hub.url });
  await hub.close();
});
