// The viz page in a real browser: Debian's headless chromium, driven by playwright-core, opens
// the page that the C++ renderer wrote for the fixture trace (VizPage.RendersFixture) and is
// used the way a person would, with the keyboard on the sliders and clicks on the selectors.
// Run by CTest (test `viz_browser`, see the viz block of CMakeLists.txt):
//
//   node tests/browser/viz.test.mjs --page build/release/viz/viz_fixture.html \
//        --trace tests/data/viz/trace.json --deps .deps/browser-test [--screenshot OUT.png]
//
// With --generated the page and trace come from `nanoinfer viz` on a real model (CTest's
// `viz_browser_command`): every check runs except the one only the hand-made fixture
// guarantees (a sink at position 0 in every row of layer 1).
//
// Exits 77 (CTest's SKIP_RETURN_CODE), printing why, when chromium or playwright-core is absent.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const { values: args } = parseArgs({
  options: { page: { type: 'string' }, trace: { type: 'string' }, deps: { type: 'string' }, screenshot: { type: 'string' },
    generated: { type: 'boolean', default: false } },
});
if (!args.page || !args.trace || !args.deps) {
  console.error('usage: viz.test.mjs --page PAGE.html --trace TRACE.json --deps DIR [--generated] [--screenshot OUT.png]');
  process.exit(2);
}

function skip(reason) {
  console.log(`viz_browser: skipped: ${reason}`);
  process.exit(77);
}
if (!fs.existsSync(CHROMIUM)) skip(`${CHROMIUM} not found (Debian package chromium; run scripts/install-deps.sh)`);
let chromium;
try {
  ({ chromium } = createRequire(path.join(path.resolve(args.deps), 'index.js'))('playwright-core'));
} catch {
  skip(`playwright-core not installed in ${args.deps}/node_modules (run scripts/fetch-test-assets.sh)`);
}

const trace = JSON.parse(fs.readFileSync(args.trace, 'utf8'));
const P = trace.prompt.length;
const pageUrl = pathToFileURL(path.resolve(args.page)).href;
// Written beside the page by the same GoogleTest: the fixture with "version": 2.
const unsupportedUrl = pathToFileURL(path.join(path.dirname(path.resolve(args.page)), 'viz_unsupported.html')).href;
const problems = [];  // console errors and warnings, page errors, requests for anything but the page
let userDataDir, context, page;

before(async () => {
  assert.ok(fs.existsSync(args.page), `${args.page} missing: CTest's viz_fixture_page writes it`);
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanoinfer-viz-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 900 },
  });
  await context.route('**/*', (route) => {
    if ([pageUrl, unsupportedUrl].includes(route.request().url())) return route.continue();
    problems.push(`request: ${route.request().url()}`);
    return route.abort();
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => { if (r.url() !== pageUrl) problems.push(`request: ${r.url()}`); });
  await page.goto(pageUrl);
});

after(async () => {
  await context?.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

// ---- helpers ---------------------------------------------------------------------------------

const texts = (selector) => page.locator(selector).allTextContents();
const percent = (p) => (100 * p).toFixed(2) + '%';

// Moves a range input with the keyboard: `start` ('Home' = its minimum, 'End' = its maximum),
// then `right` presses of ArrowRight.
async function slide(id, right, start = 'Home') {
  const slider = page.locator(`#${id}`);
  await slider.press(start);
  for (let i = 0; i < right; ++i) await slider.press('ArrowRight');
}

async function selectStep(i) {
  await page.locator('#steps button.step').nth(i).click();
}

// T = 1 and every cut off: probabilities are then the softmax of the recorded logits.
async function plainSampling() {
  await slide('temperature', 20);  // 0 + 20 x 0.05
  await slide('top_k', 0);
  await slide('top_p', 0, 'End');
  await slide('min_p', 0);
  await slide('penalty', 0);
  assert.deepEqual(await texts('#sliders output'), ['1', 'off', '1', '0', '1']);
}

function softmax(logits) {
  const max = Math.max(...logits);
  const exps = logits.map((x) => Math.exp(x - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

// ---- the page --------------------------------------------------------------------------------

test('the run panel shows the settings and the prompt tokens', async () => {
  const settings = await texts('#settings dd');
  assert.equal(settings[0], trace.settings.model);
  assert.ok(settings.includes(JSON.stringify(trace.settings.prompt)), settings.join(' | '));
  assert.ok(settings.includes(String(trace.settings.temperature)));
  // The seed, digit for digit as the file has it (a 64-bit seed is past what a JS number holds).
  assert.equal(settings[settings.length - 1], fs.readFileSync(args.trace, 'utf8').match(/"seed":\s*"?(\d+)/)[1]);
  assert.deepEqual(await texts('#prompt-tokens .token .id'), trace.prompt.map((t) => String(t.id)));
  assert.equal(await page.locator('#generated').textContent(), trace.steps.map((s) => s.chosen.piece).join(''));
});

test('the candidates view lists the recorded candidates with the chosen token marked', async () => {
  assert.equal(await page.locator('#steps button.step').count(), trace.steps.length);
  for (const i of [0, 2]) {
    await selectStep(i);
    const step = trace.steps[i];
    assert.equal(await page.locator('#candidate-rows tr').count(), step.top.length);
    assert.equal(await page.locator('#candidate-rows tr.chosen').getAttribute('data-id'), String(step.chosen.id));
    assert.equal(await page.locator('#candidate-rows tr.chosen .mark').count(), 1);
    assert.match(await page.locator('#candidates-caption').textContent(), new RegExp(`^Step ${i}: `));
  }
});

test('under the run\'s own settings every chosen token survives the cuts', async () => {
  await page.locator('#reset').click();
  const s = trace.settings;
  assert.deepEqual(await texts('#sliders output'),
    [s.temperature, Math.min(s.top_k, Math.max(...trace.steps.map((t) => t.top.length))), s.top_p, s.min_p, s.repetition_penalty].map(String));
  for (let i = 0; i < trace.steps.length; ++i) {
    await selectStep(i);
    assert.equal(await page.locator('#candidate-rows tr.chosen.cut').count(), 0, `step ${i}`);
  }
});

test('with T = 1 and no cuts the probabilities are the softmax of the raw logits', async () => {
  await selectStep(0);
  await plainSampling();
  const expected = softmax(trace.steps[0].top.map((c) => c.logit)).map(percent);
  assert.deepEqual(await texts('#candidate-rows .prob'), expected);
  assert.equal(await page.locator('#candidate-rows tr.cut').count(), 0);
});

test('moving the temperature slider changes the candidate probabilities', async () => {
  await selectStep(0);
  await plainSampling();
  const atOne = await texts('#candidate-rows .prob');
  const temperature = page.locator('#temperature');
  for (let i = 0; i < 4; ++i) await temperature.press('ArrowRight');
  assert.equal(await page.locator('#temperature-value').textContent(), '1.2');
  const hotter = await texts('#candidate-rows .prob');
  assert.notDeepEqual(hotter, atOne);
  // A higher temperature flattens the distribution: the leader loses, the last one gains.
  assert.ok(parseFloat(hotter[0]) < parseFloat(atOne[0]), `${hotter[0]} vs ${atOne[0]}`);
  assert.ok(parseFloat(hotter.at(-1)) > parseFloat(atOne.at(-1)));
  await temperature.press('Home');  // T = 0: greedy, the leader alone
  assert.deepEqual((await texts('#candidate-rows .prob'))[0], '100.00%');
  assert.equal(await page.locator('#candidate-rows tr.cut').count(), trace.steps[0].top.length - 1);
});

test('the top-k slider cuts all but the k highest logits', async () => {
  await selectStep(1);
  await plainSampling();
  await slide('top_k', 3);
  assert.equal(await page.locator('#top_k-value').textContent(), '3');
  const rows = page.locator('#candidate-rows tr');
  const n = trace.steps[1].top.length;
  for (let r = 0; r < n; ++r) {
    const cut = await rows.nth(r).evaluate((tr) => tr.classList.contains('cut'));
    assert.equal(cut, r >= 3, `row ${r}`);
    if (cut) assert.equal(await rows.nth(r).locator('.reason').textContent(), 'cut by top-k');
  }
  // The survivors are renormalised among themselves.
  const kept = softmax(trace.steps[1].top.slice(0, 3).map((c) => c.logit)).map(percent);
  assert.deepEqual((await texts('#candidate-rows .prob')).slice(0, 3), kept);
});

// Each view is one click away and starts on the first screen (900 px high), one at a time.
test('the tabs show one view at a time, each starting on the first screen', async () => {
  for (const view of ['attention', 'race', 'candidates']) {
    await page.locator(`#tab-${view}`).click();
    assert.equal(await page.locator(`#tab-${view}`).getAttribute('aria-selected'), 'true');
    const visible = [];
    for (const v of ['candidates', 'attention', 'race']) if (await page.locator(`#${v}`).isVisible()) visible.push(v);
    assert.deepEqual(visible, [view]);
    const box = await page.locator(`#${view}`).boundingBox();
    assert.ok(box.y < 200, `${view} starts ${box.y} px down`);
  }
});

test('the attention heat map has steps x context cells and follows the selectors', async () => {
  await page.locator('#tab-attention').click();
  const n = trace.steps.length;
  const cols = P + n - 1;
  assert.equal(await page.locator('#heat .cell').count(), n * cols);
  assert.equal(await page.locator('#heat .cell:not(.future)').count(), n * P + (n * (n - 1)) / 2);
  assert.equal(await page.locator('#heat .colhead').count(), cols);
  for (const [layer, head] of [[0, 0], [1, 1], [1, 0]]) {
    await page.locator('#layer').selectOption(String(layer));
    await page.locator('#head').selectOption(String(head));
    const shown = await page.locator('#heat .cell:not(.future)').evaluateAll((cells) => cells.map((c) => Number(c.dataset.w)));
    assert.deepEqual(shown, trace.steps.flatMap((s) => s.attention[layer][head]), `layer ${layer} head ${head}`);
  }
  // Layer 1 of the fixture has a strong sink: position 0 is the darkest cell of every row.
  const shades = await page.locator('#heat .cell:not(.future)').evaluateAll(
    (cells) => cells.map((c) => Number(c.style.backgroundColor.match(/([\d.]+)\)$/)[1])));
  let at = 0;
  for (let i = 0; i < n; ++i) {
    const row = shades.slice(at, at + P + i);
    at += P + i;
    if (!args.generated) assert.equal(row.indexOf(Math.max(...row)), 0, `row ${i}: ${row}`);
  }
  assert.match(await page.locator('#attention-caption').textContent(), /^Layer 1, head 0: position 0 takes /);
  // A row label selects that step everywhere.
  await page.locator('#heat .rowhead').nth(3).click();
  assert.match(await page.locator('#candidates-caption').textContent(), /^Step 3: /);
  assert.equal(await page.locator('#heat .rowhead.selected').count(), 1);
});

test('the cache race shows the work and time of both runs, ending at the same tokens', async () => {
  await page.locator('#tab-race').click();
  const { cached, uncached } = trace.race;
  assert.equal(await page.locator('#race-rows tr').count(), cached.steps.length + 1);
  const total = (run) => run.steps.reduce((a, s) => a + s.positions, 0);
  const totals = await texts('#race-rows tr.total td.num');
  assert.deepEqual(totals.slice(0, 2), [String(total(cached)), String(total(uncached))]);
  assert.equal(await page.locator('#race-verdict.good').count(), 1);
  assert.match(await page.locator('#race-verdict').textContent(), new RegExp(`same ${cached.tokens.length} tokens`));
});

test('a trace of another version is refused in words, not with a script error', async () => {
  const other = await context.newPage();
  const errors = [];
  other.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  other.on('pageerror', (e) => errors.push(e.message));
  await other.goto(unsupportedUrl);
  assert.match(await other.locator('#error').textContent(), /^Unsupported trace: format "nanoinfer-viz-trace" version 2, /);
  assert.equal(await other.locator('#views').isHidden(), true);
  assert.deepEqual(errors, []);
  await other.close();
});

test('no console errors, no page errors, no request beyond the page itself', async () => {
  // CSS applied and script ran: both came inline.
  assert.equal(await page.locator('.panel').first().evaluate((e) => getComputedStyle(e).backgroundColor), 'rgb(255, 255, 255)');
  assert.equal(await page.locator('#error').isHidden(), true);
  assert.deepEqual(problems, []);
  if (args.screenshot) {
    await page.locator('#tab-attention').click();
    await page.locator('#layer').selectOption('1');
    await page.locator('#head').selectOption('0');
    await page.locator('#tab-candidates').click();
    await page.locator('#reset').click();
    await selectStep(2);
    fs.mkdirSync(path.dirname(path.resolve(args.screenshot)), { recursive: true });
    await page.screenshot({ path: args.screenshot, fullPage: true });
  }
});
