// What the application tests share: their flags (--nanoinfer BINARY --deps DIR --tokenizer DIR),
// CTest's skip (exit 77, with the reason) when node packages or the tokenizer are missing, and
// the model they run on: a synthetic Qwen2 with Qwen2.5's real vocabulary and chat template, a
// 4,096-token context and random weights (qwen2-4k-config.json, ~19 MiB, written by `nanoinfer
// synth` into a temporary directory in well under a second). Its text is noise, but a grammar
// (JSON Schema, tool calls) makes its structured output valid, and greedy decoding makes a
// streamed reply comparable with a non-streamed one.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from '../serve/serve_process.mjs';

export const MODEL_ID = 'synth-qwen2-4k';

// Returns { args, require } (require loads from DIR/node_modules), or exits 2 (usage) / 77 (skip).
export function appTest(name, packages) {
  const { values: args } = parseArgs({
    options: { nanoinfer: { type: 'string' }, deps: { type: 'string' }, tokenizer: { type: 'string' } },
  });
  if (!args.nanoinfer || !args.deps || !args.tokenizer) {
    console.error(`usage: ${name}.test.mjs --nanoinfer BINARY --deps DIR --tokenizer DIR`);
    process.exit(2);
  }
  const skip = (reason) => {
    console.log(`apps_${name}: skipped: ${reason}`);
    process.exit(77);
  };
  if (!fs.existsSync(path.join(args.tokenizer, 'tokenizer.json'))) {
    skip(`${args.tokenizer}/tokenizer.json is missing (run scripts/fetch-test-assets.sh)`);
  }
  const require = createRequire(path.join(path.resolve(args.deps), 'index.js'));
  for (const p of packages) {
    try {
      require.resolve(p);
    } catch {
      skip(`${p} is not installed in ${args.deps}/node_modules (run scripts/fetch-test-assets.sh)`);
    }
  }
  return { args, require };
}

// The synthetic model in a fresh temporary directory (the tokenizer files linked), served on a
// free loopback port. Returns { api, stop } (stop also removes the model).
export async function serveSynthModel(args) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const root = path.resolve(here, '../..');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-apps-'));
  const model = path.join(dir, 'model');
  execFileSync(args.nanoinfer, ['synth', '--config', path.join(here, 'qwen2-4k-config.json'), '--out', model, '--seed', '7'],
               { stdio: ['ignore', 'ignore', 'inherit'] });
  for (const name of ['tokenizer.json', 'tokenizer_config.json']) {
    fs.symlinkSync(path.resolve(args.tokenizer, name), path.join(model, name));
  }
  fs.copyFileSync(path.join(root, 'data/qwen2.5-0.5b-instruct/generation_config.json'),
                  path.join(model, 'generation_config.json'));
  const s = await startServe(args.nanoinfer, ['-m', model, '--model-id', MODEL_ID, '--quiet'], { stderr: 'inherit' });
  return {
    api: s.api,
    stop: async () => {
      await s.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// The served model for a test file: started before its tests, stopped after them. Returns the
// object serveSynthModel resolves with, filled in once the server is up.
export function serveForTests(args) {
  const server = {};
  before(async () => {
    Object.assign(server, await serveSynthModel(args));
  });
  after(async () => {
    await server.stop?.();
  });
  return server;
}

// A fetch that keeps each request's parsed JSON body, for assertions on what the app sent.
export function recordingFetch() {
  const bodies = [];
  const f = async (url, init) => {
    if (init?.body && typeof init.body === 'string') bodies.push({ url: String(url), body: JSON.parse(init.body) });
    return fetch(url, init);
  };
  return { fetch: f, bodies };
}
