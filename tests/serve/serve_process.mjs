// `nanoinfer serve` as the node tests start it: on a free loopback port (--port 0 unless extra
// names one), resolved once it prints its URL on stdout. Shared by tests/serve/*.test.mjs and
// tests/browser/chat.test.mjs.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

// Resolves with { proc, base: 'http://127.0.0.1:PORT', api: base + '/v1', port, stop, stderr }.
// `stderr`: 'pipe' (collected, read with stderr()) or 'inherit' (shown with the test's output).
// stop() sends SIGTERM and resolves with the exit { code, signal } (at once if it has exited).
export async function startServe(binary, extra = [], { stderr = 'pipe' } = {}) {
  const port = extra.includes('--port') ? [] : ['--port', '0'];
  const proc = spawn(binary, ['serve', ...port, ...extra], { stdio: ['ignore', 'pipe', stderr] });
  let err = '';
  if (stderr === 'pipe') proc.stderr.on('data', (d) => { err += d; });
  const base = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/(http:\/\/\S+)\/v1\n/);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`nanoinfer serve exited with ${code} before listening${err ? `: ${err}` : ''}`)));
  });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    return exited;
  };
  return { proc, base, api: `${base}/v1`, port: Number(new URL(base).port), stop, stderr: () => err };
}

// The preamble of a serve test that uses the npm packages: --nanoinfer BINARY --deps DIR
// (usage error, exit 2, without them), and exit 77 (CTest's skip) with the reason when the
// default model or the packages are missing. Returns { args, root, Ajv2020, OpenAI }.
export function serveTestWithPackages(name) {
  const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' }, deps: { type: 'string' } } });
  if (!args.nanoinfer || !args.deps) {
    console.error(`usage: ${name}.test.mjs --nanoinfer BINARY --deps DIR`);
    process.exit(2);
  }
  const skip = (reason) => {
    console.log(`serve_${name}: skipped: ${reason}`);
    process.exit(77);
  };
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) skip('data/default-model is missing');
  try {
    const req = createRequire(path.join(path.resolve(args.deps), 'index.js'));
    return { args, root, Ajv2020: req('ajv/dist/2020').default, OpenAI: req('openai').OpenAI };
  } catch {
    skip(`ajv or openai is not installed in ${args.deps}/node_modules (run scripts/fetch-test-assets.sh)`);
  }
}
