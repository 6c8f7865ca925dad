// Bench records: every `bench` subcommand and tools/serve-bench.mjs write the same
// provenance fields, through the one writer (bench_context; the script through `bench record`);
// `bench compare` and `bench discard` as a script sees them (exit status, one-line errors).
// Each benchmark runs at its smallest size: what is checked is the records, never a time.
//
//   node tests/serve/records.test.mjs --nanoinfer build/release/nanoinfer
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when the default model is missing.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startServe } from './serve_process.mjs';

const { values: args } = parseArgs({ options: { nanoinfer: { type: 'string' } } });
if (!args.nanoinfer) {
  console.error('usage: records.test.mjs --nanoinfer BINARY');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!fs.existsSync(path.join(root, 'data/default-model/model.safetensors'))) {
  console.log('serve_records: skipped: data/default-model is missing');
  process.exit(77);
}
const bin = path.resolve(args.nanoinfer);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-records-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

// Runs the binary with NANOINFER_THREADS unset; returns { status, stdout, stderr }.
function run(argv, input) {
  const env = { ...process.env };
  delete env.NANOINFER_THREADS;
  const r = spawnSync(bin, argv, { cwd: dir, env, input, encoding: 'utf8', timeout: 300000 });
  if (r.error) throw r.error;
  return r;
}
function ok(argv, input) {
  const r = run(argv, input);
  assert.equal(r.status, 0, `${argv.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return r;
}
const readRecords = (file) => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));

const provenance = ['commit', 'dirty', 'cpu', 'cpu_flags', 'isa', 'threads', 'logical_cores', 'build_type',
                    'nanoinfer_version', 'timestamp', 'command_line', 'run'];

test('every bench subcommand and serve-bench write the same provenance fields', async () => {
  const heldout = path.join(root, 'data/default-model/heldout.txt');
  const small = path.join(dir, 'small.txt');
  fs.writeFileSync(small, fs.readFileSync(heldout, 'utf8').slice(0, 2000));
  const file = (name) => path.join(dir, `${name}.jsonl`);
  const commands = {
    bandwidth: ['bench', 'bandwidth', '-t', '1', '--size-mib', '2', '-r', '1', '-o', file('bandwidth')],
    load: ['bench', 'load', '-t', '1', '--runs', '1', '-o', file('load')],
    tokenize: ['bench', 'tokenize', '-m', path.join(root, 'data/default-model'), '-f', small, '--runs', '1',
               '-o', file('tokenize')],
    generate: ['bench', 'generate', '-t', '1', '-p', '4', '-n', '2', '-r', '1', '--probe-mib', '0', '--cache-ab',
               '--results', file('generate')],
    sampler: ['bench', 'sampler', '--calls', '2', '-r', '1', '-o', file('sampler')],
    quant: ['bench', 'quant', '-t', '1', '-f', small, '--levels', 'int8-rtn', '-o', file('quant')],
  };
  for (const argv of Object.values(commands)) ok(argv);

  // serve-bench.mjs against a server with -t 1, its rows through `bench record`.
  const served = 'records-test-model';
  const server = await startServe(bin, ['-t', '1', '--model-id', served]);
  try {
    const script = path.join(root, 'tools/serve-bench.mjs');
    const r = spawnSync(process.execPath, [script, '--url', server.base, '--clients', '1', '--requests', '1',
                                           '--max-tokens', '2', '--record', file('serve'), '--nanoinfer', bin,
                                           '--threads', '1'], { encoding: 'utf8', timeout: 300000 });
    assert.equal(r.status, 0, r.stderr);
  } finally {
    await server.stop();
  }

  const byName = {};
  for (const name of [...Object.keys(commands), 'serve']) byName[name] = readRecords(file(name));
  assert.deepEqual(byName.generate.map((r) => r.bench),
                   ['generate', 'generate', 'generate-cache-ab']);
  assert.deepEqual(byName.sampler.map((r) => [r.op, r.vocab, r.calls_per_run, r.samples_ms.length]),
                   [['argmax', 151936, 2, 1], ['top-k', 151936, 2, 1], ['top-p', 151936, 2, 1], ['chain', 151936, 2, 1]]);
  const ab = byName.generate[2];
  assert.equal(ab.cached_positions, 5);  // -p 4 -n 2: 4 + 1 cached, 4 + 5 recomputed
  assert.equal(ab.uncached_positions, 9);
  const all = Object.values(byName).flat();
  const runs = new Set();
  for (const [name, records] of Object.entries(byName)) {
    for (const r of records) {
      for (const f of provenance) assert.ok(f in r, `${name}: ${r.bench} lacks "${f}"`);
      assert.equal(r.threads, 1, `${name}: threads`);  // sampler and tokenize are single-threaded
      assert.equal(r.commit, all[0].commit);
      assert.equal(r.dirty, all[0].dirty);
      assert.equal(r.cpu, all[0].cpu);
      assert.deepEqual(r.cpu_flags, all[0].cpu_flags);
      assert.equal(r.isa, all[0].isa);  // every command ran the best tier (no --isa)
      assert.match(r.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.equal(r.run, records[0].run, `${name}: one run id per process`);
      if (name === 'serve') {
        assert.match(r.command_line, /^node \S*serve-bench\.mjs --url /);
        assert.equal(r.model, served, 'serve-bench names the served model (/v1/models)');
      } else {
        assert.ok(r.command_line.startsWith(`${bin} ${commands[name].slice(0, 2).join(' ')} `), r.command_line);
      }
    }
    runs.add(records[0].run);
  }
  assert.equal(runs.size, Object.keys(byName).length, 'a run id per process');
  assert.ok(Array.isArray(all[0].cpu_flags) && all[0].cpu_flags.length > 0);
  assert.ok(typeof all[0].commit === 'string' && all[0].commit.length > 0);
});

test('bench record refuses bad input with one line and appends nothing', () => {
  const out = path.join(dir, 'record.jsonl');
  for (const [input, message] of [
    ['{"bench":"x","commit":"abc"}\n', 'stdin line 1 sets "commit", a provenance field this command writes'],
    ['{"bench":"x"}\n[1]\n', 'stdin line 2 is not a JSON object'],
    ['{"value":1}\n', 'stdin line 1 has no "bench" name (a string)'],
    ['\n', 'no record on stdin'],
  ]) {
    const r = run(['bench', 'record', '-o', out], input);
    assert.equal(r.status, 1);
    assert.equal(r.stderr, `nanoinfer: error: bench record: ${message}\n`);
    assert.equal(fs.existsSync(out), false);
  }
  ok(['bench', 'record', '-o', out, '-t', '2', '--isa', 'scalar', '--command-line', 'my bench'],
     '{"bench":"mine","v":1}\n');
  const [r] = readRecords(out);
  assert.equal(r.bench, 'mine');
  assert.equal(r.v, 1);
  assert.equal(r.isa, 'scalar');
  assert.equal(r.threads, 2);
  assert.equal(r.command_line, 'my bench');
});

test('bench compare exits 3 on a regression, 0 without; bench discard takes a record out', () => {
  const file = path.join(dir, 'compare.jsonl');
  const row = (median, run) => JSON.stringify({ bench: 'bandwidth', cpu: 'c', isa: 'avx2', threads: 2,
                                                bytes: 1024, median_gbps: median, samples_gbps: [median], run });
  fs.writeFileSync(file, [row(10, 'a'), row(20, 'b'), row(15, 'c')].join('\n') + '\n');
  let r = run(['bench', 'compare', file]);
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stdout, /median_gbps = 15: x0\.750 of the best \(20\), x0\.750 of the last \(20\) of 2 earlier; noise 3\.0%: REGRESSION/);
  assert.match(r.stdout, /1 figure\(s\) compared, 0 without a baseline, 1 regression\(s\)\n$/);
  assert.equal(run(['bench', 'compare', file, '--min-noise', '0.3']).status, 0);
  // The 20 GB/s run was disturbed: without it the last and best is 10, and 15 is faster.
  ok(['bench', 'discard', file, '--line', '2', '--reason', 'host busy']);
  r = run(['bench', 'compare', file]);
  assert.equal(r.status, 0, r.stdout);
  assert.match(r.stdout, /x1\.500 of the best \(10\), x1\.500 of the last \(10\) of 1 earlier; noise 3\.0%: ok/);
  // --run: another file's records against this one's, all of it history.
  const other = path.join(dir, 'run.jsonl');
  fs.writeFileSync(other, row(5, 'd') + '\n');
  assert.equal(run(['bench', 'compare', file, '--run', other]).status, 3);
  // Errors: one line, exit 1.
  fs.writeFileSync(other, '{"bench":"bandwidth"}\nnot json\n');
  r = run(['bench', 'compare', file, '--run', other]);
  assert.equal(r.status, 1);
  assert.equal(r.stderr, `nanoinfer: error: ${other}:2: not a JSON object (one bench record per line)\n`);
  r = run(['bench', 'discard', file, '--line', '9', '--reason', 'x']);
  assert.equal(r.stderr, `nanoinfer: error: ${file}: no line 9 (the file has 3 lines)\n`);
});
