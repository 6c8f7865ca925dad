// `nanoinfer serve` as the node tests start it: on a free loopback port (--port 0 unless extra
// names one), resolved once it prints its URL on stdout. Shared by tests/serve/*.test.mjs and
// tests/browser/chat.test.mjs.
import { spawn } from 'node:child_process';

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
